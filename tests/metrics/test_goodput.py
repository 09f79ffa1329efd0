"""Token goodput and SLO attainment per metric, on hand-built records (exact arithmetic)."""

import pytest

from servelab.metrics.goodput import goodput_lines, goodput_section
from servelab.records import RequestRecord

MS = 1_000_000


def rec(ttft_ms, e2el_ms, out, prompt=10, error=None):
    tokens = (ttft_ms * MS,) if out == 1 else (ttft_ms * MS, e2el_ms * MS)
    return RequestRecord(request_id="r", prompt_len=prompt, expected_output_len=None, intended_ns=0,
                         dispatched_ns=0, sent_ns=0, done_ns=e2el_ms * MS, token_ns=tokens if not error else (),
                         output_tokens=out if not error else 0, error=error)


# TPOT = (e2el - ttft) / (out - 1): 10 ms for the first three, 0 for a one-token reply
MIX = [rec(100, 1090, 100), rec(100, 190, 10), rec(300, 390, 10, prompt=20), rec(50, 50, 1), rec(0, 5, 0, error="x")]


def test_token_goodput_counts_the_tokens_of_good_requests_only():
    g = goodput_section(MIX, duration_s=2.0, slo_ms={"ttft": 200, "e2el": 500})
    # good: the 10-token reply (ttft 100, e2el 190) and the one-token reply (50, 50)
    assert g["good_requests"] == 2 and g["requests"] == 5
    assert g["request_goodput"] == 1.0
    assert g["output_token_goodput"] == (10 + 1) / 2.0
    assert g["total_token_goodput"] == (10 + 10 + 1 + 10) / 2.0


def test_attainment_is_per_slo_over_every_request():
    g = goodput_section(MIX, duration_s=2.0, slo_ms={"ttft": 200, "tpot": 10, "e2el": 500})
    # ttft met by 3 (100, 100, 50); tpot by 4 (10, 10, 10, 0); e2el by 3 (190, 390, 50); all by 2
    assert g["attainment"] == {"ttft": 3 / 5, "tpot": 4 / 5, "e2el": 3 / 5, "all": 2 / 5}


def test_console_line_names_each_slo():
    g = goodput_section(MIX, duration_s=2.0, slo_ms={"ttft": 200})
    assert goodput_lines(g) == ["servelab: goodput (ttft <= 200 ms): 1.50 req/s, 55.50 output tok/s, "
                                "70.50 total tok/s; SLO met: ttft 60.0%, all 60.0%"]


@pytest.mark.parametrize("duration", [0.0, float("nan")])
def test_no_duration_gives_zero_rates(duration):
    g = goodput_section([], duration_s=duration, slo_ms={"ttft": 1})
    assert g["request_goodput"] == 0.0 and g["attainment"] == {"ttft": 0.0, "all": 0.0}
