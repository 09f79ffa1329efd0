"""The diagnosis text block and JSON shape."""

from __future__ import annotations

from diag_timelines import client_at, engine_at, make_timeline, run

from servelab.diagnose.verdict import IDS


def test_render_is_exact():
    from servelab.diagnose.verdict import render

    d = run(make_timeline(client=client_at(32), engine=engine_at(2, 30, kv=0.02, preemptions=lambda i: 0.0)),
            max_concurrency=32, max_num_seqs=2, client_cpu_fraction=0.12, schedule_lag_p99_ms=0.05)
    assert render(d).splitlines() == [
        "servelab diagnosis: scheduler-cap (confidence 0.90, high)",
        "  Requests wait at the engine while running sits at max_num_seqs 2, for 100% of the run, 0–10 s: then 30 "
        "waiting (median; max 30) and 2 running; over the whole run running mean 2.0, waiting mean 30.0; "
        "KV usage at most 2%, 0 preemptions.",
        "  next: Raise --max-num-seqs from 2 (e.g. to 4, 8) and re-run the same load; watch KV usage and "
        "preemptions as it rises. If that buys nothing, the token budget holds the queue too: raise "
        "--max-num-batched-tokens.",
        "  checked: client CPU 12% of a core, schedule lag p99 0.05 ms; client in flight mean 32.0, max 32 "
        "(sampled; cap 32), waiting for a slot mean 0.0; engine running mean 2.0, max 2; waiting mean 30.0, "
        "median 30, max 30; KV usage mean 2%, max 2%; 0 preemptions",
        "  not checked: GPU (NVML): NVML unavailable (test)",
    ]


def test_json_shape():
    d = run(make_timeline(client=client_at(8), engine=engine_at(8, 0)), max_concurrency=8).to_dict()
    assert d["verdict"] == "client-concurrency-cap"
    assert set(d) == {"verdict", "verdicts", "checked", "not_checked"}
    v = d["verdicts"][0]
    assert set(v) == {"id", "confidence", "level", "summary", "evidence", "next"} and v["id"] in IDS
