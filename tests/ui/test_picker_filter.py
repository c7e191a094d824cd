"""The attach picker's filter: a number typed is a whole number, not any digit of a PID."""

from __future__ import annotations

from gputop_doctor.ui.screens.process_picker import matches

RANKS = [
    (4203, "me", "python train.py rank 2"),
    (4204, "me", "python train.py rank 3"),
    (4213, "me", "python train.py --local_rank=13"),
]


def test_rank_3_is_the_process_that_says_rank_3() -> None:
    assert [p[0] for p in RANKS if matches(p, "rank 3")] == [4204]
    assert [p[0] for p in RANKS if matches(p, "RANK 13")] == [4213]


def test_a_whole_pid_and_text_still_match() -> None:
    assert [p[0] for p in RANKS if matches(p, "4203")] == [4203]
    assert [p[0] for p in RANKS if matches(p, "train me")] == [4203, 4204, 4213]
    assert [p[0] for p in RANKS if matches(p, "420")] == [4203, 4204]  # a PID as it is typed
    assert [p[0] for p in RANKS if matches(p, "rank 420")] == []  # beside words: whole numbers
