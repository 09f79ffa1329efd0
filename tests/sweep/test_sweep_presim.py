"""``servelab tune --simulate``: a pre-ranking of knob combinations, no engine started."""

import json

import pytest

from servelab.cli.main import main
from servelab.errors import InputError
from servelab.sweep.presim import simulated_flags


def test_the_simulated_ranking_follows_the_scheduler_cap(qwen3_path, capsys, tmp_path):
    code = main(["tune", "--simulate", "--results", str(tmp_path), "--tokenizer", qwen3_path, "--knob", "max-num-seqs=2,32,8",
                 "--loads", "32", "--dataset-name", "random", "--random-input-len", "100",
                 "--random-output-len", "16", "--num-prompts", "32"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("SIMULATED pre-ranking")
    rows = [line.split("|")[2].strip() for line in out.splitlines() if line.startswith("| ") and "config" not in line]
    assert rows == ["max-num-seqs=32", "max-num-seqs=8", "max-num-seqs=2"]
    assert "nan" not in out


def test_knobs_map_to_the_simulated_engine_s_flags_and_others_are_refused():
    assert simulated_flags({"max-num-seqs": "8", "enable-prefix-caching": "off"}) == [
        "--max-num-seqs", "8", "--no-enable-prefix-caching"]
    with pytest.raises(InputError, match="gpu-memory-utilization cannot be simulated"):
        simulated_flags({"gpu-memory-utilization": "0.8"})


def test_an_slo_is_shown_with_how_many_loads_met_it_and_the_ranking_is_saved(qwen3_path, capsys, tmp_path):
    """Issue 19 item 13: `tune --simulate --slo` never showed the SLO and saved nothing."""
    code = main(["tune", "--simulate", "--results", str(tmp_path), "--name", "pre", "--tokenizer", qwen3_path,
                 "--knob", "max-num-seqs=1,16", "--loads", "1,16", "--slo", "ttft:400", "--dataset-name", "random",
                 "--random-input-len", "100", "--random-output-len", "16", "--num-prompts", "32"])
    out = capsys.readouterr().out
    assert code == 0
    assert "SLO: p99 TTFT ≤ 400 ms; a load counts only when it meets every limit, without errors" in out
    rows = {line.split("|")[2].strip(): line.split("|")[-2].strip() for line in out.splitlines()
            if line.startswith("| ") and "config" not in line}
    assert rows["max-num-seqs=16"] == "2 of 2 loads"
    assert rows["max-num-seqs=1"].endswith("of 2 loads") and rows["max-num-seqs=1"] != "2 of 2 loads"
    saved = json.loads((tmp_path / "pre" / "presim.json").read_text())
    assert saved["slo"] == {"p99_ttft": 400.0} and len(saved["ranked"]) == 2 and saved["simulated"] is True
    assert (tmp_path / "pre" / "presim.md").read_text().startswith("SIMULATED pre-ranking")
    assert f"saved: {tmp_path / 'pre' / 'presim.json'}" in out
