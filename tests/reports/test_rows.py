"""The label–value rows ``serve`` prints and ``plan`` predicts."""

from servelab.engines import MemoryReport
from servelab.reports.rows import aligned, memory_rows


def test_memory_rows_say_dash_when_the_engine_said_nothing():
    assert memory_rows(MemoryReport()) == [
        ("weights", "-"), ("load time", "-"), ("KV cache", "-"), ("KV cache tokens", "-"),
        ("max concurrency", "-"), ("KV blocks", "-")]


def test_rows_align_on_the_longest_label_or_a_given_width():
    assert aligned([("a", "1"), ("long", "2")]) == "  a     1\n  long  2"
    assert aligned([("a", "1")], 3) == "  a    1"
