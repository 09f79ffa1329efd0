"""``servelab compare`` and ``servelab report`` over a mix of tools' results: one table, the
rows whose definition is not vLLM's marked, each foreign run's tool and version said."""

from pathlib import Path

from servelab.cli import main

FIX = Path(__file__).resolve().parents[1] / "results" / "foreign" / "fixtures"


def test_compare_guidellm_aiperf_folder_and_inference_perf_in_one_table(capsys):
    args = [str(FIX / "guidellm_v2.json"), str(FIX / "aiperf_mock"),
            str(FIX / "inference_perf_stage_0_lifecycle_metrics.json")]
    assert main.main(["compare", *args]) == 0
    out = capsys.readouterr().out
    assert out.count("== ") == 1  # one table
    assert "columns: A = guidellm_v2; B = aiperf_mock; C = inference_perf_stage_0_lifecycle_metrics" in out
    rows = {line.split("  ")[0] for line in out.splitlines()}
    assert "↓ mean ≠ TPOT incl. 1st token ms" in rows and "↓ mean ≠ ITL, tool's own ms" in rows
    assert "↓ mean TPOT ms" in rows
    assert "guidellm_v2: from guidellm 0.5.0 (schema-built fixture) (GuideLLM benchmarks.json v2)" in out
    assert "guidellm_v2: sampled 10 of 40 requests; no steady state from a sample" in out
    assert "aiperf_mock: from aiperf 0.13.0" in out
    assert "inference_perf_stage_0_lifecycle_metrics: from inference-perf (version not recorded)" in out
    assert "≠ rows: not vLLM's definition — per output token incl. the first" in out
    assert "steady output tok/s" in out  # AIPerf's records give servelab's own steady state


def test_report_takes_the_same_mix(tmp_path, capsys):
    args = [str(FIX / "guidellm_v2.json"), str(FIX / "aiperf_mock")]
    assert main.main(["report", *args, "--output-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"report:   {tmp_path / 'report.html'}\nmarkdown: {tmp_path / 'report.md'}\n"
    md = (tmp_path / "report.md").read_text()
    assert "≠ TPOT incl. 1st token" in md and "sampled 10 of 40 requests" in md


def test_an_unknown_file_among_them_is_one_line(tmp_path, capsys):
    (tmp_path / "notes.json").write_text('{"a": 1}')
    assert main.main(["compare", str(FIX / "guidellm_v2.json"), str(tmp_path / "notes.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a result file servelab knows; expected" in err
