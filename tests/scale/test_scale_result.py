"""``scale``'s result from hand-built runs: the window, the sums, the efficiency and its verdict."""

import pytest

from servelab.errors import InputError
from servelab.records import RequestRecord
from servelab.scale.result import build, render
from servelab.scale.local import JobRun

S = 1_000_000_000


def stream(sent_s: float, first_s: float, n: int, gap_s: float) -> RequestRecord:
    tokens = tuple(int((first_s + k * gap_s) * S) for k in range(n))
    return RequestRecord(request_id=f"{sent_s}", prompt_len=1, expected_output_len=n, intended_ns=int(sent_s * S),
                         dispatched_ns=int(sent_s * S), sent_ns=int(sent_s * S), done_ns=tokens[-1], token_ns=tokens,
                         token_counts=(1,) * n, output_tokens=n)


def closed_loop(replica: int, gap_s: float, waves: int = 10) -> JobRun:
    """Two slots, back-to-back requests of 10 tokens every ``gap_s``: 2 / gap_s tok/s."""
    records = [stream(w * 10 * gap_s, w * 10 * gap_s + gap_s, 10, gap_s) for w in range(waves) for _ in range(2)]
    return JobRun(replica, records, {"completed": len(records)}, 0, 0)


ENGINES = [{"base_url": f"http://127.0.0.1:{8000 + i}"} for i in range(2)]


def test_efficiency_and_window_from_known_runs():
    alone = [closed_loop(0, 0.10), closed_loop(0, 0.099)]  # ~20 tok/s alone
    together = [closed_loop(0, 0.125), closed_loop(1, 0.125)]  # 16 tok/s each: 80 %
    r = build({"name": "t", "replicas": 2}, ENGINES, alone, together)
    w = r["together"]["window"]
    # first done at 1.25 s; the second wave, sent at that very instant, counts in the opening
    # burst: its first token (1.375 s) opens the window. It closes at the last send.
    assert (w["start_s"], w["end_s"]) == (pytest.approx(1.375), pytest.approx(11.25))
    assert [x["output_tok_s"] for x in r["together"]["replicas"]] == [pytest.approx(16.0)] * 2
    assert r["efficiency"] == pytest.approx(32.0 / (2 * r["single"]["output_tok_s"]["mean"]))
    assert r["efficiency"] == pytest.approx(0.8, abs=0.01)
    assert r["verdict"] == "below 100% beyond noise"
    text = render(r)
    assert f"scaling efficiency: {r['efficiency']:.1%} — below 100% beyond noise" in text
    assert "2 replicas, common window 9.88 s (t0+1.38 s … t0+11.25 s)" in text


def test_no_common_window_is_one_line_saying_what_to_do():
    everything_at_once = JobRun(0, [stream(0, 0.1, 5, 0.1) for _ in range(4)], {}, 0, 0)
    with pytest.raises(InputError, match="no common window.*--num-prompts well above --max-concurrency"):
        build({"name": "t", "replicas": 1}, ENGINES[:1], [everything_at_once], [everything_at_once])


def test_a_simulated_engine_says_so():
    alone = [closed_loop(0, 0.1), closed_loop(0, 0.1)]
    r = build({"name": "t", "replicas": 2}, [{**e, "kind": "sim"} for e in ENGINES], alone,
              [closed_loop(0, 0.1), closed_loop(1, 0.1)])
    assert r["simulated"] and render(r).startswith("SIMULATED: engine 'sim'")
    assert not build({"name": "t", "replicas": 2}, ENGINES, alone, alone[:1] + [closed_loop(1, 0.1)])["simulated"]


def busy(run: JobRun, fraction: float, others: float = 0.01) -> JobRun:
    machine = {"cpus": 2, "busy_fraction": fraction, "ours_fraction": fraction - others, "others_fraction": others}
    return JobRun(run.replica, run.records, {**run.result, "servelab": {"machine": machine}}, 0, 0)


def test_a_saturated_host_is_named_as_the_limit_and_the_efficiency_explained():
    """Issue 19 item 4: 63 % 'below 100 % beyond noise' on a 2-core machine 99.98 % busy."""
    alone = [closed_loop(0, 0.10), closed_loop(0, 0.099)]
    together = [busy(closed_loop(0, 0.16), 0.9998), busy(closed_loop(1, 0.16), 0.9990)]
    r = build({"name": "t", "replicas": 2}, ENGINES, alone, together)
    assert r["together"]["machine"]["busy_fraction"] == 0.9998
    text = render(r)
    assert "62.2% — below 100% beyond noise: together the 2 replicas delivered 1.24× what one replica alone did" in text
    assert ("the machine's 2 CPUs were 100% busy while all 2 replicas ran (servelab, its clients and engines 99%, "
            "other programs 1%): the replicas shared saturated cores, so the host, not the engine config") in text
    assert "ramp end/drain start t0+s" in text and "ramp/drain s" not in text
    assert "in its own steady window" in text and "the per-run lines above are whole-run figures" in text
    quiet = build({"name": "t", "replicas": 2}, ENGINES, alone, [busy(x, 0.5) for x in together])
    assert "CPUs were" not in render(quiet) and "they share something" in render(quiet)


def test_the_scale_report_has_a_markdown_twin_with_the_explanation(tmp_path):
    import json

    from servelab.scale.report import write_scale_report

    alone = [closed_loop(0, 0.10), closed_loop(0, 0.099)]
    r = build({"name": "t", "replicas": 2}, ENGINES, alone,
              [busy(closed_loop(0, 0.16), 0.9998), busy(closed_loop(1, 0.16), 0.999)])
    (tmp_path / "scale.json").write_text(json.dumps(r))
    html = write_scale_report(tmp_path / "scale.json")
    md = (tmp_path / "report.md").read_text()
    assert md.startswith("# Scaling: 2 replicas (t)") and "| total |" in md
    assert "the host, not the engine config, limits the total" in md
    assert "the host, not the engine config, limits the total" in html.read_text()
