"""``sweep --over rate --stop-when-saturated`` on the mock with a scheduler cap (max_open):
each point's run is judged in full, and the ladder ends within two points past the cap.

The mock serves a request in ttft + (tokens − 1) × itl = 10 + 7 × 4 = 38 ms, max_open = 4
at a time: about 105 requests/s at most. Below it the queue and TTFT stay level; above it
both grow for as long as requests arrive."""

import json

from net_helpers import free_port
from test_sweep import mock_engine_argv

from servelab.cli import main

CAPACITY_RPS = 4 / 0.038


def test_a_rate_sweep_stops_within_two_points_past_the_cap(tmp_path, qwen3_path, capsys):
    loads = [60, 120, 240, 480]
    port = free_port()
    argv = ["sweep", "--results", str(tmp_path / "results"), "--over", "rate", "--loads", ",".join(map(str, loads)),
            "--stop-when-saturated", "--dataset-name", "random", "--random-input-len", "16",
            "--random-output-len", "8", "--num-prompts", "400", "--tokenizer", qwen3_path, "--no-telemetry",
            "--warmup", "1", *mock_engine_argv(port, max_open=4)]
    assert main.main(argv) == 0
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "results" / "sweep" / "sweep.json").read_text())
    past_cap = [x for x in loads if x > CAPACITY_RPS]
    stopped = summary["over_saturated_load"]
    assert stopped in past_cap[:2], out
    assert [p["load"] for p in summary["points"]] == [x for x in loads if x <= stopped]  # nothing above it ran
    for p in summary["points"]:  # each point ran in full: every request counted, none cut by the rule
        run = json.loads((tmp_path / "results" / "sweep" / p["folder"] / "result.json").read_text())
        ending = run["servelab"]["ending"]
        assert ending["reason"] == "completed" and ending["completed"] + ending["failed"] == 400
        assert run["servelab"]["stop_rules"]["saturated"] is (p["load"] == stopped)
    assert "judged over-saturated" in out
    skipped = [x for x in loads if x > stopped]  # said, not silently dropped
    assert summary["not_run"] == ({"loads": skipped, "why": f"request rate {stopped:g} was judged over-saturated "
                                   "(--stop-when-saturated)"} if skipped else None)


def test_a_concurrency_sweep_with_stop_when_saturated_is_refused_before_the_engine_starts(tmp_path, qwen3_path,
                                                                                          capsys):
    """Each point a closed loop at rate inf: the rule could never fire; one line, no engine, no run."""
    port = free_port()
    argv = ["sweep", "--results", str(tmp_path / "results"), "--over", "concurrency", "--loads", "2,4",
            "--stop-when-saturated", "--dataset-name", "random", "--random-input-len", "16",
            "--random-output-len", "8", "--num-prompts", "20", "--tokenizer", qwen3_path, "--no-telemetry",
            "--warmup", "1", *mock_engine_argv(port, max_open=4)]
    assert main.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--stop-when-saturated needs arrivals paced in time" in err[0]
    assert not (tmp_path / "results" / "sweep").exists()
