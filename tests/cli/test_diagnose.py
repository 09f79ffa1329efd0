"""``servelab diagnose RUN``: exact output on a hand-made saved run; folders, JSON, plots, errors."""

from __future__ import annotations

import json

import pytest

from servelab.cli.main import main
from servelab.telemetry import timeline as tl


def save_run(folder, name="bench.json", timeline=True, args=("--max-num-seqs", "2"), append_before=None):
    """A result (as bench writes it) and its timeline: 20 ticks of running 2, waiting 30, in flight 32."""
    result = {"date": "20250101-000000", "completed": 64, "duration": 5.0, "max_concurrency": 32,
              "request_rate": "inf", "output_throughput": 45.0,
              "servelab": {"client_cpu_fraction": 0.05, "schedule_lag_ms": {"p99": 0.1},
                           "engine": {"args": ["--max-model-len", "2048", *args],
                                      "memory_report": {"kv_cache_tokens": 46592}}}}
    path = folder / name
    if timeline:
        t = tl.Timeline({"servelab_timeline": 1, "duration_s": 5.0, "engine": {"status": "ok", "names": {}},
                         "gpu": {"status": "absent", "detail": "NVML unavailable (no driver)"}}, [])
        for i in range(20):
            t.samples.append({"t_ms": 250.0 * i, "src": "engine", "running": 2.0, "waiting": 30.0,
                              "kv_usage": 0.012, "preemptions": 0.0, "generation_tokens": 45.0 * i / 4})
            t.samples.append({"t_ms": 250.0 * i + 1, "src": "client", "in_flight": 32, "waiting": 32, "lag_ms": 0.0})
        tpath = folder / "elsewhere" / "bench.timeline.jsonl"
        tpath.parent.mkdir(exist_ok=True)
        tl.write(t, tpath)
        result["servelab"]["telemetry"] = {"timeline_file": str(tpath)}
    lines = [json.dumps(append_before)] if append_before else []
    path.write_text("\n".join([*lines, json.dumps(result)]))
    return path


EXPECTED = [
    "servelab diagnosis: scheduler-cap (confidence 0.90, high)",
    "  Requests wait at the engine while running sits at max_num_seqs 2, for 100% of the run, 0–5 s: then 30 "
    "waiting (median; max 30) and 2 running; over the whole run running mean 2.0, waiting mean 30.0; "
    "KV usage at most 1%, 0 preemptions.",
    "  next: Raise --max-num-seqs from 2 (e.g. to 4, 8) and re-run the same load; watch KV usage and "
    "preemptions as it rises. If that buys nothing, the token budget holds the queue too: raise "
    "--max-num-batched-tokens.",
    "  checked: client CPU 5% of a core, schedule lag p99 0.10 ms; client in flight mean 32.0, max 32 (sampled; cap 32), "
    "waiting for a slot mean 32.0; engine running mean 2.0, max 2; waiting mean 30.0, median 30, max 30; "
    "KV usage mean 1%, max 1%; 0 preemptions",
    "  not checked: GPU (NVML): NVML unavailable (no driver)",
]


def test_exact_output_for_a_result_file(tmp_path, capsys):
    assert main(["diagnose", str(save_run(tmp_path))]) == 0
    assert capsys.readouterr().out.splitlines() == EXPECTED


def test_a_folder_and_a_moved_timeline(tmp_path, capsys):
    save_run(tmp_path)
    (tmp_path / "elsewhere" / "bench.timeline.jsonl").rename(tmp_path / "bench.timeline.jsonl")
    assert main(["diagnose", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == EXPECTED


def test_engine_limits_from_flags_when_the_result_has_none(tmp_path, capsys):
    path = save_run(tmp_path, args=())
    assert main(["diagnose", str(path)]) == 0
    assert "running plateaus at 2" in capsys.readouterr().out
    assert main(["diagnose", str(path), "--max-num-seqs", "2"]) == 0
    assert capsys.readouterr().out.splitlines() == EXPECTED


def test_json(tmp_path, capsys):
    path = save_run(tmp_path)
    assert main(["diagnose", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["run"] == str(path) and out["verdict"] == "scheduler-cap"
    assert out["verdicts"][0]["evidence"]["waiting_median"] == 30.0
    assert out["not_checked"] == ["GPU (NVML): NVML unavailable (no driver)"]


def test_the_last_run_of_an_appended_file(tmp_path, capsys):
    path = save_run(tmp_path, name="runs.txt", append_before={"completed": 1, "servelab": {}})
    assert main(["diagnose", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == EXPECTED


def test_without_a_timeline(tmp_path, capsys):
    assert main(["diagnose", str(save_run(tmp_path, timeline=False))]) == 0
    out = capsys.readouterr().out
    assert out.startswith("servelab diagnosis: not-judged") and "no timeline" in out  # no samples: it cannot judge
    assert main(["diagnose", str(tmp_path / "bench.json"), "--plot", str(tmp_path / "p")]) == 2
    assert "no timeline beside it to plot" in capsys.readouterr().err


def test_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    assert main(["diagnose", str(save_run(tmp_path)), "--plot", str(tmp_path / "plots")]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "plots: " + ", ".join(
        str(tmp_path / "plots" / n) for n in ("queue.png", "kv_usage.png", "tokens_per_s.png"))


def test_plot_into_a_file_is_one_line_exit_2(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    (tmp_path / "taken").write_text("a file, not a folder")
    assert main(["diagnose", str(save_run(tmp_path)), "--plot", str(tmp_path / "taken")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"servelab: error: --plot {tmp_path / 'taken'}: cannot write plots there") and \
        err.count("\n") == 1


@pytest.mark.parametrize("setup, needle", [
    (lambda d: None, "no result JSON"),
    (lambda d: [save_run(d, "a.json"), save_run(d, "b.json")], "2 results (a.json, b.json)"),
    (lambda d: (d / "x.json").write_text("{not json"), "no result JSON"),
])
def test_bad_folders_are_one_line_exit_2(tmp_path, capsys, setup, needle):
    setup(tmp_path)
    assert main(["diagnose", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_a_missing_path(tmp_path, capsys):
    assert main(["diagnose", str(tmp_path / "nope.json")]) == 2
    assert "no such result file or folder" in capsys.readouterr().err


@pytest.mark.parametrize("content, missing", [
    ({"overhead_s": 0.002, "per_seq_s": 1e-4, "per_token_s": 2e-5, "per_kv_token_s": 0.0, "floor_s": 0.0,
      "source": "planner roofline"}, "no 'completed' or 'duration'"),  # the step model plan writes
    ({"completed": 3, "servelab": {}}, "no 'duration'"),
])
def test_a_file_that_is_not_a_bench_result_is_refused_in_one_line(tmp_path, capsys, content, missing):
    path = tmp_path / "step_model.json"
    path.write_text(json.dumps(content))
    assert main(["diagnose", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == (
        f"servelab: error: {path}: not a bench result ({missing}); diagnose reads what "
        "`servelab bench --save-result` writes\n")
