"""Energy over a session: NVML's counter where recorded, integrated power otherwise."""

from __future__ import annotations

from gputop_doctor.report.energy import EnergyAcc, EnergySource, energy_from


def test_counter_wins_and_a_driver_reload_is_not_negative_energy() -> None:
    acc = EnergyAcc()
    for energy in (1000.0, 1500.0, 2100.0, 50.0, 650.0):  # reload between 2100 and 50
        acc.add(power_w=400.0, energy_j=energy, dt=1.0)
    wh, source = acc.result()
    assert source is EnergySource.COUNTER
    assert wh == round((500 + 600 + 600 + 400) / 3600, 3)  # the reset step is left out


def test_integrated_power_without_counter_and_nothing_without_either() -> None:
    acc = EnergyAcc()
    acc.add(power_w=300.0, energy_j=None, dt=2.0)
    acc.add(power_w=100.0, energy_j=1.0, dt=2.0)  # one reading is no difference
    assert acc.result() == (round(800 / 3600, 3), EnergySource.INTEGRATED)
    assert EnergyAcc().result() == (None, None)


def test_the_words_say_which_way_each_gpu_was_measured() -> None:
    counter, integrated = EnergySource.COUNTER, EnergySource.INTEGRATED
    assert energy_from([counter, counter]) == "NVML energy counter"
    assert energy_from([integrated]) == "integrated power draw (power x time)"
    assert energy_from([counter, integrated, integrated]) == (
        "NVML energy counter on 1 GPU(s), integrated power draw (power x time) on 2"
    )
    assert energy_from([]) == "no power or energy recorded"


def test_a_counter_held_between_readings_counts_the_time_after_the_last_as_power() -> None:
    """A live source reads the counter every 10 s and keeps it in between: the ticks after
    the last reading are power x time, not lost (and not counted twice once read again)."""
    acc = EnergyAcc()
    readings = [1000.0] * 10 + [1000.0 + 4500.0] * 10 + [1000.0 + 9000.0] * 3
    for energy in readings:  # 23 one-second ticks at 400 W; the counter moved 450 J a second
        acc.add(power_w=400.0, energy_j=energy, dt=1.0)
    wh, source = acc.result()
    assert source is EnergySource.COUNTER
    assert wh == round((9000 + 3 * 400) / 3600, 3)  # 20 s counted, the last 3 s integrated
