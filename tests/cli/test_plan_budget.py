"""`servelab plan` says which vLLM release's defaults it assumes and the memory share it used,
and its printed breakdown adds up to that share (issue 34 item 10)."""

import re

import pytest

from servelab.cli import plan as plan_cli
from servelab.cli.main import Parser, main
from servelab.planner import GPUS, MODELS
from servelab.planner.models import tensor_parallel_sizes
from servelab.reports.plan_text import format_plan

# vLLM serves these on a GPU; GGUF types are llama.cpp's (their plans print no vLLM share).
QUANTIZATIONS = ("none", "fp8", "int8", "awq", "gptq")
# Each printed GiB value is rounded to 0.01: three parts drift at most 0.015 from their exact sum,
# the share itself 0.005 more.
ROUNDING_GIB = 0.02


def _parser() -> Parser:
    parser = Parser(prog="servelab plan")
    plan_cli.add_arguments(parser)
    return parser


def _printed(argv: list[str]) -> str | None:
    """The plan's text, or None where the model does not fit there."""
    plan = plan_cli.make(_parser().parse_args(argv))
    return format_plan(plan) if plan.fits else None


def _gib(text: str, label: str) -> float:
    return float(re.search(rf"^  {re.escape(label)} +([\d.,]+) GiB", text, re.M)[1].replace(",", ""))


def _fitting(model: str, gpu: str, quant: str) -> str | None:
    """One GPU, else the most of them the model's heads split over (up to 8), TP across them all."""
    base = ["--model", model, "--quantization", quant, "--max-model-len", "4096"]
    text = _printed([*base, "--gpu", gpu])
    if text is None:
        tp = max(size for size in tensor_parallel_sizes(MODELS[model]) if size <= 8)
        text = _printed([*base, "--gpu", f"{gpu}:{tp}"])
    return text


def test_every_table_plan_adds_up_to_the_share_it_states():
    """Every model × GPU × quantization of the tables: weights + KV cache + other memory (per GPU,
    as printed) = the share printed = GPU memory × the utilization the header states."""
    checked = 0
    for model in MODELS:
        for gpu in (g for g in GPUS if g != "cpu"):
            for quant in QUANTIZATIONS:
                text = _fitting(model, gpu, quant)
                if text is None:
                    continue
                where = f"{model} {gpu} {quant}"
                stated = float(re.search(r"--gpu-memory-utilization ([\d.]+) \(its default\)", text)[1])
                share, memory, used = map(float, re.search(
                    r"^  vLLM's share +([\d.]+) GiB = ([\d.]+) GiB x ([\d.]+) per GPU", text, re.M).groups())
                parts = _gib(text, "weights") + _gib(text, "KV cache") + _gib(text, "other memory")
                assert used == stated == 0.92, where
                assert abs(parts - share) <= ROUNDING_GIB, (where, parts, share)
                assert abs(memory * used - share) <= ROUNDING_GIB, (where, memory, used, share)
                checked += 1
    assert checked > 1000  # most of the 44 × 13 × 5 fit on one GPU or on 8


def _text(capsys, *flags) -> str:
    assert main(["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "A40", "--max-model-len", "4096", *flags]) == 0
    return capsys.readouterr().out


def test_the_header_names_the_release_and_an_older_one_takes_its_own_default(capsys):
    """vLLM took 0.92 from 0.20.0 (0.9 up to 0.19.1): a plan for an older engine's log uses 0.9."""
    now, old = _text(capsys), _text(capsys, "--vllm-version", "0.19.1")
    assert "assumes: vLLM 0.32's defaults (--vllm-version); --gpu-memory-utilization 0.92 (its default)" in now
    assert "assumes: vLLM 0.19.1's defaults (--vllm-version); --gpu-memory-utilization 0.9 (its default)" in old
    assert _gib(old, "KV cache") < _gib(now, "KV cache")
    assert _gib(_text(capsys, "--vllm-version", "0.20"), "KV cache") == _gib(now, "KV cache")
    given = _text(capsys, "--vllm-version", "0.19", "--gpu-memory-utilization", "0.92")
    assert "--gpu-memory-utilization 0.92 (given)" in given and _gib(given, "KV cache") == _gib(now, "KV cache")


def test_the_largest_batch_tier_belongs_to_its_releases():
    """≥ 160 GiB GPUs get 16384 batched tokens from vLLM 0.28 on; before, the ≥ 70 GiB tier's 8192."""
    from servelab.planner.plan import default_batch

    def batch(version: str) -> int:
        return default_batch(plan_cli.make(_parser().parse_args(
            ["--model", "Qwen/Qwen3-8B", "--gpu", "B200", "--vllm-version", version])).spec)[0]

    assert (batch("0.27"), batch("0.28.0"), batch("0.32")) == (8192, 16384, 16384)


@pytest.mark.parametrize("version", ["latest", "0", "x0.20"])
def test_a_version_that_is_no_release_is_one_line(version, capsys):
    assert main(["plan", "--gpu", "A40", "--model", "Qwen/Qwen3-8B", "--vllm-version", version]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--vllm-version {version!r}" in err[0], err
