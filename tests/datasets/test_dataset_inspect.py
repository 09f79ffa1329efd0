"""servelab/datasets/inspect.py: statistics, histogram and text, on hand-built requests."""

from __future__ import annotations

import pytest

from servelab.datasets.inspect import (
    HistogramRow,
    LengthStats,
    histogram,
    inspect_requests,
    length_stats,
    preview,
    render_report,
    table,
)
from servelab.records import SampleRequest


def req(prompt_len, output_len, i=0, prompt="p"):
    return SampleRequest(prompt, prompt_len, output_len, f"r-{i}")


def test_length_stats_are_numpy_population_statistics():
    assert length_stats([1, 2, 3, 4]) == LengthStats(1, 4, 2.5, 2.5, pytest.approx(1.118033988749895))
    assert length_stats([5]) == LengthStats(5, 5, 5.0, 5.0, 0.0)


def test_nine_equal_width_bins_last_one_closed():
    rows = histogram(list(range(10)))
    assert [(r.low, r.high) for r in rows] == [(i, i + 1) for i in range(9)]
    assert [r.count for r in rows] == [1, 1, 1, 1, 1, 1, 1, 1, 2]  # 9 falls in the closed last bin


def test_equal_lengths_make_one_row():
    assert histogram([7, 7, 7]) == (HistogramRow(7, 7, 3),)


def test_outputs_left_to_the_server_have_no_statistics():
    inspection = inspect_requests([req(3, None), req(5, None)])
    assert inspection.output is None
    assert inspection.prompt == LengthStats(3, 5, 4.0, 4.0, 1.0)


def test_report_for_one_bin_exact_text():
    requests = [req(7, 16, 0, "same\nlength"), req(7, None, 1, "x" * 205)]
    text = render_report(inspect_requests(requests), requests, "custom (d.jsonl)", "tok", num_samples=1)
    assert text == (
        "Overview\n"
        "  dataset    custom (d.jsonl)\n"
        "  tokenizer  tok\n"
        "  samples    2\n"
        "\n"
        "Length distributions (tokens)\n"
        "          min  max   mean  median   std\n"
        "  prompt    7    7   7.00    7.00  0.00\n"
        "  output   16   16  16.00   16.00  0.00\n"
        "\n"
        "Sample prompts (1 of 2)\n"
        "  r-0  prompt_len=7  output_len=16\n"
        "    same\\nlength\n"
        "\n"
        "Prompt length histogram (tokens, 1 bin)\n"
        "  7  ########################################  2\n"
    )


def test_preview_cuts_at_200_characters_on_one_line():
    assert preview("a\tb\nc\\") == "a\\tb\\nc\\\\"
    assert preview("x" * 200) == "x" * 200
    assert preview("x" * 201) == "x" * 200 + "..."


def test_table_pads_columns_and_strips_line_ends():
    assert table([["a", "1", ""], ["bbb", "22", "z"]], "lrl") == "  a     1\n  bbb  22  z"


def test_a_token_id_prompt_is_previewed_as_its_ids():
    from servelab.datasets.inspect import preview

    assert preview((5, 17, 9)) == "token ids 5 17 9"
