"""The study file: every mistake is one line naming the field, found before any engine starts."""

import textwrap

import pytest

from servelab.cli import main
from servelab.errors import InputError
from servelab.study import session
from servelab.study.file import load_study

GOOD = """
[study]
name = "s"
repeats = 2

[engines.a]
kind = "external"
url = "http://127.0.0.1:9"

[engines.b]
embedded = true
args = ["--max-num-seqs", 2]

[workloads.w1]
args = ["--dataset-name", "random", "--num-prompts", "4"]
max-concurrency = 2

[workloads.w2]
dataset-name = "random"
random-input-len = 16
ignore-eos = true

[[runs]]
engines = ["b"]
workloads = ["w1", "w2"]

[[runs]]
engines = ["a"]
workloads = ["w1"]
"""


def write(tmp_path, text: str):
    path = tmp_path / "study.toml"
    path.write_text(textwrap.dedent(text))
    return path


def error_of(tmp_path, text: str) -> str:
    with pytest.raises(InputError) as info:
        load_study(write(tmp_path, text))
    message = str(info.value)
    assert "\n" not in message
    return message


def test_a_good_file_resolves_engines_workloads_and_run_order(tmp_path):
    study = load_study(write(tmp_path, GOOD))
    assert (study.name, study.repeats, study.seed) == ("s", 2, 0)
    assert study.engines["b"].embedded and study.engines["b"].args == ("--max-num-seqs", "2")
    assert study.engines["a"].spec.url == "http://127.0.0.1:9"
    # engines in definition order (each starts once), then workloads, then repeats
    assert [(k.engine, k.workload, k.repeat) for k in study.runs()] == [
        ("a", "w1", 1), ("a", "w1", 2), ("b", "w1", 1), ("b", "w1", 2), ("b", "w2", 1), ("b", "w2", 2)]
    w1 = study.workloads["w1"].argv
    assert w1[:4] == ("--dataset-name", "random", "--num-prompts", "4")
    assert "--max-concurrency" in w1 and "--seed" in w1 and "--percentile-metrics" in w1
    assert "--ignore-eos" in study.workloads["w2"].argv


def test_without_runs_every_engine_meets_every_workload(tmp_path):
    text = GOOD.split("[[runs]]")[0]
    assert len(load_study(write(tmp_path, text)).pairs) == 4


@pytest.mark.parametrize("text, expected", [
    (GOOD.replace("repeats = 2", "repeat = 2"), "study.toml: [study]: unknown field 'repeat' (did you mean 'repeats'?)"),
    (GOOD.replace('args = ["--max-num-seqs", 2]', 'argz = ["--max-num-seqs", 2]'),
     "study.toml: engines.b: unknown field 'argz' (did you mean 'args'?)"),
    (GOOD.replace("max-concurrency = 2", "max-concurency = 2"),
     "study.toml: workloads.w1: unknown field 'max-concurency' (did you mean 'max-concurrency'?)"),
    (GOOD.replace('"--num-prompts", "4"', '"--num-promts", "4"'),
     "study.toml: workloads.w1.args: unknown bench flag '--num-promts' (did you mean '--num-prompts'?)"),
    (GOOD.replace('engines = ["b"]', 'engines = ["bb"]'),
     "study.toml: runs[0].engines: unknown engine 'bb' (defined: a, b)"),
    (GOOD.replace('workloads = ["w1"]\n', 'workloads = ["w3"]\n'),
     "study.toml: runs[1].workloads: unknown workload 'w3' (defined: w1, w2)"),
    (GOOD.replace("repeats = 2", "repeats = 0"), "study.toml: study.repeats: must be >= 1, got 0"),
    (GOOD.replace("ignore-eos = true", 'dataset-path = "/nonexistent/data.json"'),
     "study.toml: workloads.w2: --dataset-path cannot be used with --dataset-name random"),
    (GOOD.replace('kind = "external"', 'kind = "vlm"'),
     "study.toml: engines.a: unknown engine kind 'vlm' (choose from embedded, vllm, llamacpp, external, command, sim)"),
    (GOOD.replace("embedded = true", 'embedded = true\nmodel = "x"'),
     ("study.toml: engines.b.model: not allowed with embedded = true (the embedded engine is vLLM's CPU build "
      "serving SmolLM2-135M-Instruct)")),
    (GOOD.replace('"--num-prompts", "4"', '"--num-prompts", "4", "--port", "1"'),
     "study.toml: workloads.w1.args: --port is set by the study for each run; remove it"),
    (GOOD.replace("max-concurrency = 2", "max-concurrency = 0"),
     "study.toml: workloads.w1: --max-concurrency must be greater than 0"),
    (GOOD.replace("[study]", "[stdy]"), "study.toml: unknown field 'stdy' (did you mean 'study'?)"),
    (GOOD + "\n[engines.c\n", None),
])
def test_mistakes_are_one_line_naming_the_field(tmp_path, text, expected):
    message = error_of(tmp_path, text)
    if expected is None:
        assert message.startswith(f"{tmp_path / 'study.toml'}: not valid TOML")
    else:
        assert message == expected


def test_a_missing_dataset_file_is_named(tmp_path):
    text = GOOD.replace('dataset-name = "random"\nrandom-input-len = 16',
                        'dataset-name = "sharegpt"\ndataset-path = "/nonexistent/sharegpt.json"')
    assert error_of(tmp_path, text) == "study.toml: workloads.w2: dataset /nonexistent/sharegpt.json does not exist"


def test_a_missing_model_path_is_named(tmp_path):
    text = GOOD.replace('kind = "external"\nurl = "http://127.0.0.1:9"', 'kind = "vllm"\nmodel = "/nonexistent/model"')
    assert error_of(tmp_path, text) == "study.toml: engines.a: model path /nonexistent/model does not exist"


def test_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        load_study(tmp_path / "nope.toml")


def test_cli_rejects_a_bad_study_before_starting_any_engine(tmp_path, capsys, monkeypatch):
    """Exit 2, one line on stderr — and nothing launched: the command engine would
    have created a file, and start_engine itself is booby-trapped."""
    witness = tmp_path / "started"
    text = f"""
    [engines.e]
    kind = "command"
    command = ["sh", "-c", "touch {witness}; sleep 30"]
    ready_url = "http://127.0.0.1:9/health"
    [workloads.w]
    dataset-name = "sharegpt"
    dataset-path = "{tmp_path}/missing.json"
    """
    calls = []
    monkeypatch.setattr(session, "start_engine", lambda *a, **k: calls.append(a))
    code = main.main(["study", "run", str(write(tmp_path, text))])
    err = capsys.readouterr().err
    assert code == 2
    assert err == f"servelab: error: study.toml: workloads.w: dataset {tmp_path}/missing.json does not exist\n"
    assert calls == [] and not witness.exists()


def test_check_prints_the_plan_without_starting_anything(tmp_path, capsys):
    path = write(tmp_path, GOOD)
    assert main.main(["study", "check", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "study s: 6 runs, 2 repeats, results in results/s"
    assert lines[1].split() == ["a", "w1", "1", "todo"]


def test_a_command_engine_without_a_port_listens_where_its_ready_url_says(tmp_path):
    study = load_study(write(tmp_path, """
    [study]
    port = 8200
    [engines.e]
    kind = "command"
    command = ["./srv", "--port", "9000"]
    ready_url = "http://127.0.0.1:9000/health"
    [workloads.w]
    dataset-name = "random"
    """))
    assert study.engines["e"].port == 9000 and study.engines["e"].spec.base_url == "http://127.0.0.1:9000"


def test_repeats_are_numbered_across_engine_starts(tmp_path):
    study = load_study(write(tmp_path, """
    [study]
    repeats = 2
    starts = 3
    [engines.e]
    embedded = true
    [workloads.a]
    dataset-name = "random"
    [workloads.b]
    dataset-name = "random"
    """))
    assert study.total_repeats == 6
    assert [(k.workload, k.repeat, study.start_of(k)) for k in study.runs()] == [
        ("a", 1, 1), ("a", 2, 1), ("b", 1, 1), ("b", 2, 1),
        ("a", 3, 2), ("a", 4, 2), ("b", 3, 2), ("b", 4, 2),
        ("a", 5, 3), ("a", 6, 3), ("b", 5, 3), ("b", 6, 3)]


def test_a_run_done_on_another_engine_start_is_stale_after_starts_change(tmp_path):
    from servelab.study import layout
    from servelab.study.file import RunKey

    text = """
    [study]
    results = "{results}"
    repeats = 2
    [engines.e]
    embedded = true
    [workloads.a]
    dataset-name = "random"
    """.format(results=tmp_path / "results")
    before = load_study(write(tmp_path, text))
    key = RunKey("e", "a", 2)
    layout.run_dir(*layout.study_run(before, key)).mkdir(parents=True)
    layout.mark_done(*layout.study_run(before, key), {})
    assert layout.status(*layout.study_run(before, key)) == "done"
    after = load_study(write(tmp_path, text.replace("repeats = 2", "repeats = 1\n    starts = 2")))
    assert after.start_of(key) == 2 and layout.status(*layout.study_run(after, key)) == "stale"  # measured on start 1


def test_the_study_owns_where_the_engine_is_and_benchs_run_owned_flags():
    from servelab.flags.bench_serve import RUN_OWNED_DESTS, RUN_OWNED_FLAGS
    from servelab.study.file import OWNED_FLAGS, bench_actions

    dests = {a.option_strings[0]: a.dest for a in bench_actions()}
    assert [dests[f] for f in RUN_OWNED_FLAGS] == list(RUN_OWNED_DESTS)  # each derived flag is its dest's
    assert set(OWNED_FLAGS) == {"--base-url", "--host", "--port", "--model", *RUN_OWNED_FLAGS}
    assert "--save-detailed" not in OWNED_FLAGS and "save_detailed" not in RUN_OWNED_DESTS  # a workload's choice


def test_bench_actions_are_every_bench_flag_added_to_the_parser_or_a_group():
    import argparse

    from servelab.flags.bench_serve import add_bench_arguments
    from servelab.study.file import bench_actions, bench_flags

    parser = argparse.ArgumentParser(add_help=False)
    add_bench_arguments(parser)
    assert [a.option_strings for a in bench_actions()] == [a.option_strings for a in parser._actions]
    assert {"--dataset-name", "--ray", "--sim-max-num-seqs", "--save-detailed"} <= bench_flags()


def test_gpu_hour_cost_from_the_study_an_engine_overrides_and_each_run_carries(tmp_path):
    text = GOOD.replace("repeats = 2", "repeats = 2\ngpu_hour_cost = 2.5").replace(
        'url = "http://127.0.0.1:9"', 'url = "http://127.0.0.1:9"\ngpu_hour_cost = 4')
    study = load_study(write(tmp_path, text))
    assert (study.engines["a"].gpu_hour_cost, study.engines["b"].gpu_hour_cost) == (4.0, 2.5)
    runs = type("Runs", (), {"engine": study.engines["a"]})()
    assert session._priced(study.workloads["w1"].spec, runs).output.gpu_hour_cost == 4.0
    assert load_study(write(tmp_path, GOOD)).engines["a"].gpu_hour_cost is None
    assert error_of(tmp_path, GOOD.replace("repeats = 2", "repeats = 2\ngpu_hour_cost = 0")) == (
        "study.toml: study.gpu_hour_cost: expected a positive number, got 0")


def test_a_price_is_not_a_runs_identity(tmp_path):
    from servelab.study.layout import run_hash

    plain, priced = load_study(write(tmp_path, GOOD)), load_study(write(tmp_path, GOOD.replace(
        "repeats = 2", "repeats = 2\ngpu_hour_cost = 2.5")))
    assert run_hash(plain.engines["a"], plain.workloads["w1"].spec) == run_hash(priced.engines["a"],
                                                                                priced.workloads["w1"].spec)
