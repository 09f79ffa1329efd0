"""Knobs: parsing, combinations, folder names, engine flags."""

import pytest

from servelab.errors import InputError
from servelab.search.knobs import (
    Knob,
    config_name,
    configs,
    knob_flags,
    model_of,
    parse_knob,
)


def test_parse_and_aliases():
    assert parse_knob("max-num-seqs=2,8, 32") == Knob("max-num-seqs", ("2", "8", "32"))
    assert parse_knob("prefix-caching=on,off").name == "enable-prefix-caching"
    assert parse_knob("--block-size=16,32").name == "block-size"


@pytest.mark.parametrize("text, message", [
    ("max-num-seqs", "expected NAME=V1,V2"), ("max-num-seqs=", "expected NAME=V1,V2"),
    ("max-num-seqs=0", "not a whole number > 0"), ("gpu-memory-utilization=1.5", "not a number in (0, 1]"),
    ("enable-prefix-caching=maybe", "not on or off"), ("max-num-seqs=8,8", "repeated"),
    ("Bad Name=1", "expected NAME=V1,V2")])
def test_bad_knobs_name_the_problem(text, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)").replace("]", r"\]")):
        parse_knob(text)


def test_every_combination_first_knob_slowest():
    got = configs([parse_knob("max-num-seqs=8,32"), parse_knob("enable-prefix-caching=on,off")])
    assert got == [{"max-num-seqs": "8", "enable-prefix-caching": "on"},
                   {"max-num-seqs": "8", "enable-prefix-caching": "off"},
                   {"max-num-seqs": "32", "enable-prefix-caching": "on"},
                   {"max-num-seqs": "32", "enable-prefix-caching": "off"}]
    with pytest.raises(InputError, match="given twice"):
        configs([parse_knob("block-size=16"), parse_knob("block-size=32")])


def test_flags_switches_and_pass_through():
    choice = {"max-num-seqs": "8", "enable-prefix-caching": "off", "enable-chunked-prefill": "on",
              "max-open": "4", "enforce-eager": "yes", "model": "/m/Qwen3-AWQ"}
    assert knob_flags(choice) == ["--max-num-seqs", "8", "--no-enable-prefix-caching", "--enable-chunked-prefill",
                                  "--max-open", "4", "--enforce-eager"]
    assert model_of(choice) == "/m/Qwen3-AWQ" and model_of({"model": "default"}) is None


def test_config_names_are_folder_safe():
    assert config_name({"max-num-seqs": "8", "enable-prefix-caching": "off"}) == \
        "max-num-seqs=8,enable-prefix-caching=off"
    assert config_name({"model": "/models/Qwen3-8B-AWQ/"}) == "model=Qwen3-8B-AWQ"
    assert "/" not in config_name({"kv-cache-dtype": "a/b"})
