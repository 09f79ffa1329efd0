"""``servelab compare``: exact output on hand-built results, Markdown, reference, errors."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reports"))
from study_factory import make_study, result

from servelab.cli import main

EXPECTED = """\
== workload w — random · 4 prompts · ~128 in / ~64 out tokens · max concurrency 2 · rate inf · seed 0
metric               base [2 runs] (baseline)  capped [2 runs]  vs base
-------------------  ------------------------  ---------------  ------------------------
↑ total tok/s        300.0 ± 0.0               300.0 ± 0.0      1.00× +0.0% within noise
↑ output tok/s       101.0 ± 1.0               40.5 ± 0.5       0.40× −59.9% worse
↑ req/s              1.500 ± 0.000             1.500 ± 0.000    1.00× +0.0% within noise
↓ mean TTFT ms       102.0 ± 2.0               1,050.0 ± 50.0   10.29× +929.4% worse
↓ median TTFT ms     100.0 ± 0.0               100.0 ± 0.0      1.00× +0.0% within noise
↓ P99 TTFT ms        100.0 ± 0.0               100.0 ± 0.0      1.00× +0.0% within noise
↓ mean TPOT ms       20.0 ± 0.0                20.0 ± 0.0       1.00× +0.0% within noise
↓ median TPOT ms     20.0 ± 0.0                20.0 ± 0.0       1.00× +0.0% within noise
↓ P99 TPOT ms        20.0 ± 0.0                20.0 ± 0.0       1.00× +0.0% within noise
↓ mean ITL ms        20.0 ± 0.0                20.0 ± 0.0       1.00× +0.0% within noise
↓ median ITL ms      20.0 ± 0.0                20.0 ± 0.0       1.00× +0.0% within noise
↓ P99 ITL ms         20.0 ± 0.0                20.0 ± 0.0       1.00× +0.0% within noise
↓ mean E2EL ms       1,000.0 ± 0.0             1,000.0 ± 0.0    1.00× +0.0% within noise
↓ median E2EL ms     1,000.0 ± 0.0             1,000.0 ± 0.0    1.00× +0.0% within noise
↓ P99 E2EL ms        1,000.0 ± 0.0             1,000.0 ± 0.0    1.00× +0.0% within noise
↓ model weights GiB  0.250*                    0.250*           1.00× +0.0% same
↑ KV cache tokens    46,592                    46,592           1.00× +0.0% same
↑ max concurrency ×  22.75                     22.75            1.00× +0.0% same
  * model weights not reported by the engine (vLLM's CPU build does not): servelab plan's for the dtype it serves, else the checkpoint files' size
  cells: mean ± half-range over repeats; vs: ratio to the baseline, change, verdict
  verdict rule: better/worse = the min–max ranges over repeats do not overlap AND the means differ by more than 10% \
for throughputs, 20% for latencies; otherwise within noise (needs ≥ 2 repeats per config). ↑ higher is better, ↓ lower is better.
"""


@pytest.fixture
def folder(tmp_path):
    return make_study(tmp_path, {
        "base": {"w": [{"output_throughput": 100.0, "mean_ttft_ms": 100.0},
                       {"output_throughput": 102.0, "mean_ttft_ms": 104.0}]},
        "capped": {"w": [{"output_throughput": 40.0, "mean_ttft_ms": 1000.0},
                         {"output_throughput": 41.0, "mean_ttft_ms": 1100.0}]}})


def test_compare_a_study_exact_output(folder, capsys):
    assert main.main(["compare", str(folder)]) == 0
    assert capsys.readouterr().out == EXPECTED


def test_markdown_and_output_file(folder, tmp_path, capsys):
    out = tmp_path / "cmp.md"
    assert main.main(["compare", str(folder), "--format", "md", "--baseline", "capped", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("### workload w\n\nLoad: random · 4 prompts")
    assert "| metric | capped [2 runs] (baseline) | base [2 runs] | vs capped |" in text
    assert "| ↑ output tok/s | 40.5 ± 0.5 | 101.0 ± 1.0 | 2.49× +149.4% better |" in text
    assert out.read_text() == text


def test_the_noise_floor_is_a_flag(folder, capsys):
    assert main.main(["compare", str(folder), "--noise-floor", "70"]) == 0
    text = capsys.readouterr().out
    assert "0.40× −59.9% within noise" in text and "more than 70% for throughputs, 140% for latencies" in text


def test_a_reference_column(folder, tmp_path, capsys):
    ref = tmp_path / "ref.json"
    ref.write_text('{"source": "blog", "date": "2025-05-01", "hardware": "1x A100", '
                   '"numbers": {"output_throughput": 202.0}}')
    assert main.main(["compare", str(folder), "--reference", str(ref)]) == 0
    text = capsys.readouterr().out
    assert "ref: blog (2025-05-01) [1 run]" in text and "2.00× +100.0% reference" in text
    assert "⚠ conditions differ from the baseline's: hardware '1x A100' vs ours 'CPU only: Test CPU'" in text


@pytest.mark.parametrize("argv, message", [
    (["--baseline", "nope"], "servelab: error: --baseline 'nope' is not one of the configs: base, capped\n"),
    (["--noise-floor", "120"], "servelab: error: --noise-floor must be within 0..100 (percent)\n"),
])
def test_bad_input_is_one_line_and_exit_2(folder, capsys, argv, message):
    assert main.main(["compare", str(folder), *argv]) == 2
    assert capsys.readouterr().err == message


def test_a_missing_path(tmp_path, capsys):
    assert main.main(["compare", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err == f"servelab: error: {tmp_path / 'nope'} does not exist\n"


def test_result_files_with_long_names_get_short_headers_and_a_legend(tmp_path, capsys):
    """Issue 19 item 14: whole file names as headers made ~250-character rows."""
    paths = []
    for name, tok_s in (("bf16", 100.0), ("awq", 160.0), ("fp8", 150.0)):
        path = tmp_path / f"vllm-10.0qps-concurrency10-Qwen3-14B-{name}-20261201-101010.json"
        path.write_text(json.dumps({**result({"output_throughput": tok_s}, name, "w", 1), "label": None}))
        paths.append(str(path))
    assert main.main(["compare", *paths]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("metric"))
    assert header.split() == ["metric", "bf16", "[1", "run]", "(baseline)", "awq", "[1", "run]", "vs", "bf16",
                              "fp8", "[1", "run]", "vs", "bf16"]
    assert max(len(line) for line in out.splitlines() if not line.startswith("  ")) < 130  # was ~300 with the names
    assert "columns: bf16 = vllm-10.0qps-concurrency10-Qwen3-14B-bf16-20261201-101010; awq = " in out


def test_column_names_keep_short_names_cut_shared_ends_else_letters():
    from servelab.reports.table import column_names

    assert column_names(["base", "capped"]) == {"base": "base", "capped": "capped"}
    shared = ["run-" + "x" * 30 + "-a", "run-" + "x" * 30 + "-bb"]
    assert column_names(shared) == {shared[0]: "a", shared[1]: "bb"}
    long = ["run-" + "a" * 30, "run-" + "b" * 30]
    assert column_names(long) == {long[0]: "A", long[1]: "B"}  # what is left is still too long
    pair = ["results/bf16/vllm-inf-Qwen3-14B.json", "results/awq/vllm-inf-Qwen3-14B.json"]
    assert column_names(pair) == {pair[0]: "bf16", pair[1]: "awq"}


def test_unreported_weights_are_the_served_dtypes_not_the_files(folder, capsys):
    """Issue 34 item 11: a bf16 checkpoint (0.251 GiB of files) served in float32 holds 0.50 GiB,
    as the plan stored beside each run says; the comparison showed the files' size."""
    for memory_file in folder.rglob("memory.json"):
        memory = json.loads(memory_file.read_text())
        memory["checkpoint_gib"] = 0.251
        memory["plan"]["memory_report"]["weights_gib"] = 0.502
        memory_file.write_text(json.dumps(memory))
    assert main.main(["compare", str(folder)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "model weights GiB" in line)
    assert row.split()[4:6] == ["0.502*", "0.502*"], row
