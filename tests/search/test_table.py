"""The table people paste: exact text."""

from servelab.search.points import Point
from servelab.search.table import points_table

EXPECTED = """\
| concurrency | out tok/s | req/s | p50 TTFT ms | p99 TTFT ms | p50 TPOT ms | p99 TPOT ms | p50 E2EL ms | p99 E2EL ms | errors | note            |
|:------------|----------:|------:|------------:|------------:|------------:|------------:|------------:|------------:|-------:|:----------------|
| 1           |      28.0 |  0.88 |          90 |          95 |           - |           - |           - |           - |      0 |                 |
| 8           |     130.2 |  4.06 |         400 |         812 |          50 |          61 |       2,300 |       2,950 |      0 | operating point |"""


def test_points_table_is_aligned_markdown_with_notes():
    pts = [Point(8, 130.25, {"median_ttft": 400, "p99_ttft": 812.4, "median_tpot": 50, "p99_tpot": 61,
                             "median_e2el": 2300, "p99_e2el": 2950}, errors=0, request_throughput=4.06),
           Point(1, 28.0, {"median_ttft": 90, "p99_ttft": 95}, request_throughput=0.875)]
    assert points_table(pts, "concurrency", {8: "operating point"}) == EXPECTED
