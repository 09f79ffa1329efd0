"""Telemetry: one timeline per run — the engine's ``/metrics``, the GPU (NVML) and
the client's own state, sampled on one monotonic clock while a bench runs.

    recorder.py  ``Recorder``: start/stop around a run → ``Timeline``
    scrape.py    the scraper process (``/metrics`` + NVML), off the client's loop
    client.py    the client's counters, read by a timer on its loop
    names.py     engine metric names as data (vLLM old and new, llama.cpp)
    prometheus.py, engine.py, gpu.py   the sources (gpu.py: the only NVML caller in servelab)
    host.py      what the machine is (CPU, cores, memory);  machine.py  whether it was shared
    timeline.py  the on-disk format;  summary.py  the result's summary (PNGs: reports/timeline_plots.py)

Import from the modules. This file imports nothing, so the scraper process
(``python -m servelab.telemetry.scrape``) starts without the client's machinery;
pynvml loads only when used.
"""
