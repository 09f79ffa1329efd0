"""``servelab tune --simulate``: a pre-ranking of knob combinations, no engine started."""

import pytest

from servelab.cli.main import main
from servelab.errors import InputError
from servelab.sweep.presim import sim_flags


def test_the_simulated_ranking_follows_the_scheduler_cap(qwen3_path, capsys):
    code = main(["tune", "--simulate", "--tokenizer", qwen3_path, "--knob", "max-num-seqs=2,32,8",
                 "--loads", "32", "--dataset-name", "random", "--random-input-len", "100",
                 "--random-output-len", "16", "--num-prompts", "32"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("SIMULATED pre-ranking")
    rows = [line.split("|")[2].strip() for line in out.splitlines() if line.startswith("| ") and "config" not in line]
    assert rows == ["max-num-seqs=32", "max-num-seqs=8", "max-num-seqs=2"]
    assert "nan" not in out


def test_knobs_map_to_the_sim_flags_and_others_are_refused():
    assert sim_flags({"max-num-seqs": "8", "enable-prefix-caching": "off"}) == [
        "--sim-max-num-seqs", "8", "--sim-no-enable-prefix-caching"]
    with pytest.raises(InputError, match="gpu-memory-utilization cannot be simulated"):
        sim_flags({"gpu-memory-utilization": "0.8"})
