"""The stop-rule flags: parsed into LoadSpec, bad values one line naming the flag."""

import pytest

from servelab.errors import InputError
from servelab.flags.bench_serve import parse_bench_spec
from servelab.flags.stop import parse_error_rate

BASE = ["--dataset-name", "random", "--model", "m"]


def test_the_flags_become_the_load_specs_stop_rules():
    load = parse_bench_spec([*BASE, "--stop-when-saturated", "--stop-on-errors", "5",
                             "--stop-on-error-rate", "0.25:30"]).load
    assert (load.saturation, load.stop_on_errors, load.stop_on_error_rate) == ("stop", 5, (0.25, 30.0))
    assert parse_bench_spec(BASE).load.saturation == "off"


@pytest.mark.parametrize("text", ["half:10", "0.5", "0:10", "1.5:10", "0.5:0"])
def test_a_bad_error_rate_names_the_flag(text):
    with pytest.raises(InputError, match="--stop-on-error-rate"):
        parse_error_rate(text)


@pytest.mark.parametrize("extra", [["--workers", "2"], ["--simulate"]])
def test_stop_rules_need_a_single_process_run(extra):
    with pytest.raises(InputError, match="need a single-process run"):
        parse_bench_spec([*BASE, "--stop-on-errors", "3", *extra])


def test_stop_on_errors_must_be_positive():
    with pytest.raises(InputError, match="--stop-on-errors must be >= 1"):
        parse_bench_spec([*BASE, "--stop-on-errors", "0"])


def test_the_saturation_helps_window_and_start_are_the_watchs():
    """The help says the rule the watch judges: its window and how soon it can fire."""
    import argparse

    from servelab.flags.stop import add_stop_arguments
    from servelab.loadgen import watch

    parser = argparse.ArgumentParser()
    add_stop_arguments(parser)
    help_text = " ".join(parser.format_help().split())
    assert f"over the last {watch.WINDOW_S:g} s, or the whole run while shorter, judged from {watch.MIN_SPAN_S:g} s in" \
        in help_text
    assert "needs a finite --request-rate or a ramp" in help_text
