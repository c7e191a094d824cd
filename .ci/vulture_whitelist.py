"""Names vulture (`.venv/bin/vulture`, configured in pyproject.toml) must not call unused.

Vulture reads the package as text and cannot see a name used by reflection, by a library that
calls it by name, or only by the tests. Each line below "uses" one such name; the reason is
beside it. Textual's own hooks (``action_*``, ``on_*``, ``watch_*``, ``compose``,
``render_line``...) are matched by pattern in ``[tool.vulture] ignore_names`` instead.

A name goes here only with a reason; a name nothing needs is deleted, not listed.
"""

# ruff: noqa
_ = object()

# -- dataclass fields read by name: the CSV schema (export/schema.py Field(column, attr)), the
#    Prometheus health table (export/prometheus_health.py), JSON output (dataclasses.asdict)
_.per_cpu_pct  # core/model.py HostSample: filled by the sources, shown by the host panel's bars
_.load5  # core/model.py HostSample: CSV column host_load5
_.load15  # core/model.py HostSample: CSV column host_load15
_.mem_clock_max_mhz  # core/model.py GpuSample: snapshot --json (a static fact, read once)
_.dram_active_pct  # core/model.py GpuSample: snapshot --json (GPM DRAM bandwidth)
_.omp_num_threads  # core/model.py ThreadEnv: environment variables, kept by name
_.mkl_num_threads  # core/model.py ThreadEnv
_.openblas_num_threads  # core/model.py ThreadEnv
_.ecc_aggregate_corrected  # core/health.py GpuHealth: CSV and Prometheus, by name
_.gpu_util_pct  # core/verdict.py Verdict: the numbers the headline rests on (JSON, tests)
_.gpu_idle_fraction  # core/verdict.py Verdict
_.gpu_util_cv  # core/verdict.py Verdict
_.mean_square  # rules/_stats.py TickMoments: read by attrgetter in tick_figures (in C, per tick)
_.low_share  # rules/_stats.py TickMoments: read by attrgetter in tick_figures
_.mem_max_mib  # report/builder.py GpuSummary: analyze --json (asdict)
_.thresholds  # core/rule.py RuleSpec: the thresholds class a rule declares (checked by a test)
_.delivered  # alerts/dispatch.py HookStats: counted beside failed and dropped

# -- called by the standard library or pynvml by name
_.TOMLDecodeError  # config/file.py TomlReader protocol: tomllib.TOMLDecodeError
_.fp  # parameter names of overridden standard-library signatures (tomllib.load, urllib)
_.newurl  # core/net.py: urllib's redirect_request(req, fp, code, msg, headers, newurl)
_.redirect_request  # core/net.py: urllib.request.HTTPRedirectHandler calls it
_.signum  # commands/record.py: a signal handler's (signum, frame)
_.client_address  # commands/serve_http.py: socketserver's handle_error(request, client_address)
_.handle_error  # commands/serve_http.py: socketserver calls it
_.do_GET  # commands/serve_http.py: http.server calls it
_.log_message  # commands/serve_http.py: http.server calls it
_.daemon_threads  # commands/serve_http.py: socketserver.ThreadingMixIn reads it
_.request_queue_size  # commands/serve_http.py: socketserver.TCPServer reads it
_.address_family  # commands/serve_http.py: socketserver.TCPServer reads it
_.collect  # export/prometheus.py: prometheus_client calls a collector's collect()
_.numMetrics  # sources/nvml/gpm.py: ctypes struct fields pynvml reads
_.sample1  # sources/nvml/gpm.py
_.sample2  # sources/nvml/gpm.py
_.metricId  # sources/nvml/gpm.py
_._finalizer  # sources/host/kept_files.py: holding the weakref.finalize keeps it armed

# -- Textual reads these by name
_.container  # get_content_height(container, viewport, width) parameter
_.can_replace  # ui/messages.py: Textual's message queue asks a message whether it replaces
_.exit_event  # ui/terminal_driver.py: the stop event Textual's LinuxDriver asks in its input loop
_.border_title  # Widget attributes Textual draws
_.border_subtitle
_.display

# -- the widgets' observable state, read by tests (as DataTable.cursor_row is)
_.cursor_row  # ui/widgets/process_table.py
_.hover_row  # ui/widgets/process_table.py
_.lines_rendered  # ui/widgets/process_table.py: what a frame repainted (docs/architecture.md)
_.rows_built  # ui/widgets/process_table.py
_.row_keys  # ui/widgets/process_table.py: the rows in order, jobs' total rows included
_.elapsed_s  # sources/demo/machine.py: the simulated clock, beside DemoMachine.tick

# -- urllib's OpenerDirector calls a handler's <scheme>_open by name
_.http_open  # core/net.py
_.https_open  # core/net.py

# -- http.server calls these by name; the listener's count of 503s is read by its test
_.version_string  # commands/serve_http.py: the Server header
_.refused  # commands/serve_http.py: connections answered 503

# -- the trainers call their callbacks' hooks by name, with every argument of the signature
_.teardown  # integrations/lightning.py: Lightning's Callback.teardown
_.outputs  # integrations/lightning.py: on_train_batch_end's arguments (positional)
_.batch_idx  # integrations/lightning.py: on_train_batch_start/_end's arguments (positional)
_.add_doctor  # integrations/hf.py: the public way to add the callback (docs/integrations.md)

# -- ctypes structure fields set for the C library to read
_.fieldId  # sources/nvml/kept_buffers.py: nvmlFieldValue_t's request, read by NVML
_.scopeId  # sources/nvml/kept_buffers.py: the link of a scoped field
_.sensorType  # sources/nvml/kept_readings.py: the sensor nvmlDeviceGetTemperatureV reads

# -- read by the benchmarks (outside vulture's paths)
_.symbol_name  # sources/nvml/kept_readings.py: bench_breakdown.py names each getter's NVML time
