"""A simulated run never passes for a measured one: compare refuses to mix them unless
asked, and every place that shows one says SIMULATED."""

import json

import pytest

from servelab.cli.compare import comparison_text
from servelab.errors import InputError
from servelab.flags.bench_serve import parse_bench_spec
from servelab.reports import methodology
from servelab.results.runs import load_runs
from servelab.measure.run import execute

LOAD = ["--dataset-name", "random", "--random-input-len", "64", "--random-output-len", "8",
        "--num-prompts", "16", "--disable-tqdm", "--save-result"]


@pytest.fixture
def results(tmp_path, qwen3_path):
    for n in (2, 8):
        execute(parse_bench_spec(["--simulate", "--tokenizer", qwen3_path, "--sim-max-num-seqs", str(n), *LOAD,
                                  "--result-dir", str(tmp_path), "--result-filename", f"sim{n}.json"]))
    measured = json.loads((tmp_path / "sim2.json").read_text())
    del measured["servelab"]["simulated"]
    measured["servelab"]["engine"] = {"kind": "vllm", "args": []}
    (tmp_path / "measured.json").write_text(json.dumps(measured))
    return tmp_path


def test_simulated_runs_compare_among_themselves_each_marked(results):
    text = comparison_text([results / "sim2.json", results / "sim8.json"])
    assert "⚠ sim2: SIMULATED result, not a measurement" in text
    assert "⚠ sim8: SIMULATED result, not a measurement" in text


def test_compare_refuses_to_mix_simulated_and_measured_in_one_line(results):
    with pytest.raises(InputError) as err:
        comparison_text([results / "sim2.json", results / "measured.json"])
    assert "\n" not in str(err.value)
    assert "refusing to compare simulated (sim2) with measured (measured)" in str(err.value)
    assert "--allow-simulated" in str(err.value)


def test_allow_simulated_shows_them_side_by_side_and_says_so(results):
    text = comparison_text([results / "sim2.json", results / "measured.json"], allow_simulated=True)
    assert "SIMULATED beside measured (--allow-simulated): sim2 simulated, measured measured" in text


def test_methodology_names_the_simulator_and_its_step_model(results):
    runs = load_runs([results / "sim2.json", results / "sim8.json"])
    lines = [x for x in methodology.limits(runs, 0.1) if x.startswith("SIMULATED")]
    assert lines and "sim2, sim8" in lines[0] and "step model from given: 2 ms" in lines[0]


def test_a_study_run_on_the_sim_engine_records_its_limits_and_step_model():
    from servelab.measure.simulated import detected

    models = {"data": [{"id": "sim", "owned_by": "servelab-sim (SIMULATED)"}]}
    engine = {"kind": "sim", "args": ["--max-num-seqs", "2", "--step-overhead-ms", "4", "--tokenizer", "x"]}
    section = detected(models, engine)["simulated"]
    assert section["mode"] == "real-time"
    assert section["limits"]["max_num_seqs"] == 2 and section["step_model"]["overhead_s"] == 0.004
    assert detected({"data": [{"id": "m", "owned_by": "vllm"}]}, engine) == {}
