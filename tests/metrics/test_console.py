"""The console block against a golden file (vLLM's rows, order and layout).

Regenerate with SERVELAB_REGEN_GOLDEN=1; the regenerating run still fails, so a
changed golden is always a reviewed change.
"""

import os
from pathlib import Path

import pytest

from servelab.metrics.console import console_block
from servelab.metrics.summary import Stat, Summary

GOLDEN = Path(__file__).parent / "golden"


def summary(goodput=None):
    st = lambda m: Stat(m, m + 1, 0.5, ((99.0, m + 9),))  # noqa: E731
    return Summary(
        completed=2000, failed=0, duration_s=201.456, total_input=433_000, total_output=380_000,
        request_throughput=9.93, request_goodput=goodput, output_throughput=1886.27,
        max_output_tokens_per_s=2410.0, max_concurrent_requests=10, total_token_throughput=4035.69,
        stats_ms={"ttft": st(45.1), "tpot": st(20.25), "itl": st(20.0), "e2el": st(4000.0),
                  "client_queue_time": st(3.0)})


def check(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("SERVELAB_REGEN_GOLDEN"):
        path.write_text(text + "\n")
        pytest.fail(f"regenerated {path}; review and rerun without SERVELAB_REGEN_GOLDEN")
    assert text + "\n" == path.read_text()


def test_block_with_rate_and_concurrency():
    text = console_block(summary(), max_concurrency=10, request_rate=10.0, selected=["ttft", "tpot", "itl"])
    check("console_rate_concurrency.txt", text)


def test_block_unlimited_with_goodput_and_e2el():
    text = console_block(summary(goodput=8.5), max_concurrency=None, request_rate=float("inf"),
                         selected=["ttft", "tpot", "itl", "e2el"])
    check("console_inf_goodput.txt", text)


def test_rows_are_vllm_layout_forty_wide():
    text = console_block(summary(), max_concurrency=None, request_rate=float("inf"), selected=["ttft"])
    lines = text.splitlines()
    assert lines[0] == "=" * 12 + " Serving Benchmark Result " + "=" * 12
    assert lines[1] == "Successful requests:".ljust(40) + " " + "2000".ljust(10)
    assert lines[-1] == "=" * 50
