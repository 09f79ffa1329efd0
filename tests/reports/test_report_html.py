"""The HTML report: self-contained, every string from the results escaped, plots present."""

import re

from study_factory import make_study

from servelab.reports.report import build_report, in_flight_series, itl_gaps, write_report

EVIL = '<script>alert("x")</script><img src="http://example.com/x.png">'


def test_prompt_text_and_names_are_escaped_and_nothing_is_fetched(tmp_path):
    folder = make_study(tmp_path, {"base": {"w": [{}, {}]}, "b<i>x</i>": {"w": [{}, {}]}}, prompts_text=EVIL)
    html_path, md_path = write_report(folder)
    html = html_path.read_text()
    assert "<script" not in html.lower() and "alert(&#34;x&#34;)" in html
    assert "&lt;script&gt;" in html and "<i>x</i>" not in html and "b&lt;i&gt;x&lt;/i&gt;" in html
    # no resource that a browser would fetch: no src/href to anything but in-page anchors
    assert not re.search(r'\s(?:src|href)="(?!#)', html.replace('src="http://example.com', ""))
    assert 'src="http' not in html.replace("&lt;img src=&#34;http://example.com", "")
    assert "default-src 'none'" in html  # and the page forbids it anyway
    assert html.count("<svg") >= 4  # memory, throughput, TTFT, ITL, in flight
    md = md_path.read_text()
    assert "## Methodology and limits" in md and EVIL in md  # Markdown keeps it inside a code fence
    assert md.split(EVIL)[0].rstrip().endswith("```")


def test_the_methodology_names_hardware_engine_model_hash_and_limits(tmp_path):
    folder = make_study(tmp_path, {"base": {"w": [{}, {}]}, "other": {"w": [{}, {}]}})
    report = build_report([folder])
    assert report.hardware.startswith("CPU Test CPU · 2 logical cores")
    engine = dict(report.engines)["base"]
    assert "vllm 0.32.0" in engine and "sha256 abababababababab…" in engine and "dtype torch.bfloat16" in engine
    assert "quantization None" in engine and "knobs: --max-model-len 2048" in engine
    workload = dict(report.workloads)["w"]
    assert "synthetic token ids" in workload and "seed 0" in workload and "max concurrency 2" in workload
    limits = " ".join(report.limits)
    assert "measure generation work, not answer quality" in limits
    assert "capped concurrency at 2" in limits and "vLLM's CPU build" in limits
    assert "prefix cache was emptied before every run" in limits and "from 2 repeats per config" in limits


def test_memory_budget_splits_weights_kv_and_other(tmp_path):
    folder = make_study(tmp_path, {"base": {"w": [{}]}})
    [m] = build_report([folder]).memory
    assert (m["weights"], m["KV cache"], m["other"], m["estimated"]) == (0.25, 1.0, 1.75, True)


def test_the_planners_kv_tokens_stand_beside_the_engines(tmp_path):
    from servelab.reports.markdown import predicted_kv

    folder = make_study(tmp_path, {"base": {"w": [{}]}})
    [m] = build_report([folder]).memory
    assert (m["kv_tokens"], predicted_kv(m)) == (46592, "46,592 (exact)")
    assert predicted_kv({**m, "kv_tokens_error": 0.0123}) == "46,592 (+1.2%)"
    assert predicted_kv({**m, "kv_tokens_predicted": None}) == "-"


def test_in_flight_steps_and_itl_gaps():
    recs = [{"sent_ms": 0, "done_ms": 100}, {"sent_ms": 50, "done_ms": 150}, {"sent_ms": 100, "done_ms": 120}]
    xs, ys = in_flight_series(recs)
    assert list(zip(xs, ys)) == [(0.0, 0), (0.0, 1), (0.05, 2), (0.1, 1), (0.1, 2), (0.12, 1), (0.15, 0)]
    assert itl_gaps({"token_ms": [0, 10, 30], "token_counts": [1, 1, 2]}) == [10, 10, 10]


def test_engine_telemetry_adds_kv_usage_and_tokens_per_second_over_time(tmp_path):
    import json

    from servelab.reports.report import token_rate

    folder = make_study(tmp_path, {"base": {"w": [{}, {}]}, "other": {"w": [{}, {}]}})
    before = build_report([folder]).figures["timeline"]
    assert len(before) == 1  # no telemetry: requests in flight only
    samples = [{"t_ms": 250.0 * i, "src": "engine", "running": 2.0, "kv_usage": 0.01 * i,
                "generation_tokens": 40.0 * i} for i in range(8)]
    lines = [{"servelab_timeline": 1}, *samples]
    (folder / "base" / "w" / "1" / "result.timeline.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    after = build_report([folder]).figures["timeline"]
    assert len(after) == 2 and after[1][0].startswith("engine KV cache usage (%, solid) and generated tokens/s")
    assert after[1][1].count("<svg") == 1
    assert token_rate(samples) == [(0.25 * i, 160.0) for i in range(1, 8)]  # 40 tokens per 0.25 s
    restarted = [*samples, {"t_ms": 2000.0, "src": "engine", "generation_tokens": 5.0}]
    assert token_rate(restarted)[-1] == (1.75, 160.0)  # the reset gives no point


def test_the_noise_limit_says_whether_ranges_include_engine_restarts(tmp_path):
    import json

    folder = make_study(tmp_path, {"base": {"w": [{}, {}]}, "other": {"w": [{}, {}]}})
    once = " ".join(build_report([folder]).limits)
    assert "Each engine started once, so start-to-start variation shows only between configs" in once
    for config in ("base", "other"):
        path = folder / config / "w" / "2" / "result.json"
        result = json.loads(path.read_text())
        result["servelab"]["study"].update(start=2, starts=2)
        path.write_text(json.dumps(result))
    twice = " ".join(build_report([folder]).limits)
    assert "Each engine was started 2 or more times with repeats on every start, so the ranges include " \
           "start-to-start variation." in twice
