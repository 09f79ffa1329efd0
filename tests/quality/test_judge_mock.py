"""Quality judged end to end: ``servelab bench`` against the mock answering per prompt
(mock/answers.py), whose truth — which answers it corrupted, and from which token — is what
agreement and task score must equal exactly."""

from __future__ import annotations

import json

import pytest
from mock_bench import bench as mock_bench
from mock_bench import write_prompts

from servelab.cli.main import main
from servelab.quality.tasks import answer_key, builtin

N = 60


@pytest.fixture(autouse=True)
def prompts(tmp_path):
    """N prompts in a custom dataset: another --seed sends the same prompts in another order."""
    return write_prompts(tmp_path, N, "Tell me about item {}.")


def bench(url, tok, out, *extra):
    return mock_bench(url, tok, out, *extra, n=N, output_len=12)


def result(path):
    return json.loads(path.read_text())


def test_agreement_equals_the_mocks_truth_and_the_verdicts(mock_server, qwen3_path, tmp_path, capsys):
    ref, rep, lossy = tmp_path / "ref.json", tmp_path / "rep.json", tmp_path / "lossy.json"
    assert bench(mock_server(answers="prompt").url, qwen3_path, ref, "--save-detailed", "--temperature", "0") == 0
    # a repeat that moves a little (another corrupt seed, 5 %): the reference's own floor
    assert bench(mock_server(answers="prompt", corrupt_rate=0.05, corrupt_seed=1).url, qwen3_path, rep,
                 "--quality-reference", str(ref)) == 0
    floor_share = result(rep)["servelab"]["quality"]["agreement"]["share"]
    mock = mock_server(answers="prompt", corrupt_rate=0.3, corrupt_seed=2)
    capsys.readouterr()
    assert bench(mock.url, qwen3_path, lossy, "--quality-reference", str(ref), str(rep),
                 "--request-rate", "50", "--seed", "9") == 0  # another order: pairs by prompt, not position
    out = capsys.readouterr().out
    got = result(lossy)["servelab"]["quality"]["agreement"]
    truth = [r for r in mock.truth().requests if "warmup" not in r.request_id]
    corrupted = [r for r in truth if r.corrupted_at is not None]
    lengths = {r.request_id: r.planned_tokens for r in truth}
    assert got["paired"] == N and got["identical"] == N - len(corrupted)
    expect = (sum(r.corrupted_at / lengths[r.request_id] for r in corrupted) + N - len(corrupted)) / N
    assert got["prefix_share"] == pytest.approx(expect)
    assert got["floor"] == {"share": floor_share, "prefix_share": pytest.approx(got["floor"]["prefix_share"]),
                            "pairs": 1}
    assert got["verdict"] == "diverges beyond it" and "→ diverges beyond it" in out


def test_the_same_configuration_at_another_load_is_the_same(mock_server, qwen3_path, tmp_path):
    ref, again = tmp_path / "ref.json", tmp_path / "again.json"
    mock = mock_server(answers="prompt")
    assert bench(mock.url, qwen3_path, ref, "--save-detailed", "--temperature", "0") == 0
    assert bench(mock.url, qwen3_path, again, "--quality-reference", str(ref), "--max-concurrency", "2") == 0
    got = result(again)["servelab"]["quality"]["agreement"]
    assert (got["identical"], got["prefix_share"], got["verdict"]) == (N, 1.0, "same within its own variation")


def test_a_sampled_run_is_not_comparable(mock_server, qwen3_path, tmp_path):
    ref, hot = tmp_path / "ref.json", tmp_path / "hot.json"
    mock = mock_server(answers="prompt")
    assert bench(mock.url, qwen3_path, ref, "--save-detailed", "--temperature", "0") == 0
    assert bench(mock.url, qwen3_path, hot, "--quality-reference", str(ref), "--temperature", "0.7") == 0
    assert result(hot)["servelab"]["quality"]["agreement"] == {"verdict": "not comparable: sampled"}


def test_task_score_equals_the_truth_and_each_task_verdict(mock_server, qwen3_path, tmp_path, capsys):
    key = tmp_path / "key.json"
    key.write_text(json.dumps(answer_key(builtin())))
    ref, same, bad = tmp_path / "ref.json", tmp_path / "same.json", tmp_path / "bad.json"
    tasks = ("--quality-tasks", "builtin", "--max-concurrency", "16")
    assert bench(mock_server(answers="prompt", answer_key=str(key)).url, qwen3_path, ref, *tasks) == 0
    assert result(ref)["servelab"]["quality"]["task"]["right"] == 320  # the key answers every item right
    assert bench(mock_server(answers="prompt", answer_key=str(key)).url, qwen3_path, same, *tasks,
                 "--quality-reference", str(ref)) == 0
    assert result(same)["servelab"]["quality"]["task"]["verdict"] == "keeps the reference's score"
    mock = mock_server(answers="prompt", answer_key=str(key), corrupt_rate=0.2)
    assert bench(mock.url, qwen3_path, bad, *tasks, "--quality-reference", str(ref)) == 0
    task = result(bad)["servelab"]["quality"]["task"]
    wrong = sum(r.corrupted_at is not None for r in mock.truth().requests if "warmup" not in r.request_id)
    assert task["items"] == 320 and task["right"] == 320 - wrong and task["verdict"] == "worse than the reference"
    lo, hi = task["interval"]
    assert lo < task["score"] < hi


def test_bad_quality_input_is_one_line(mock_server, qwen3_path, tmp_path, capsys):
    mock = mock_server(answers="prompt")
    plain, other = tmp_path / "plain.json", tmp_path / "other.json"
    assert bench(mock.url, qwen3_path, plain) == 0  # no answers kept
    assert bench(mock.url, qwen3_path, tmp_path / "x.json", "--quality-reference", str(plain)) == 2
    assert "no responses kept (run the bench with --save-detailed" in capsys.readouterr().err
    assert bench(mock.url, qwen3_path, other, "--save-detailed", "--temperature", "0", "--num-prompts", "50") == 0
    assert bench(mock.url, qwen3_path, tmp_path / "y.json", "--quality-reference", str(other)) == 2
    err = capsys.readouterr().err
    assert f"{N - 50} of its {N} prompts are not in the reference" in err and "Traceback" not in err


def test_compare_shows_agreement_and_task_rows_with_verdicts(mock_server, qwen3_path, tmp_path):
    from servelab.cli.compare import comparison_text

    key = tmp_path / "key.json"
    key.write_text(json.dumps(answer_key(builtin())))
    tasks = ("--quality-tasks", "builtin", "--max-concurrency", "16")
    runs = [("ref-a", "fp32", {}), ("ref-b", "fp32", {"corrupt_rate": 0.02, "corrupt_seed": 1}),
            ("lossy", "fp8", {"corrupt_rate": 0.2}), ("fast", "seqs", {})]
    for name, label, fields in runs:
        mock = mock_server(answers="prompt", answer_key=str(key), **fields)
        assert bench(mock.url, qwen3_path, tmp_path / f"{name}.json", *tasks, "--label", label) == 0
    text = comparison_text([str(tmp_path / f"{name}.json") for name, _, _ in runs])
    agree = next(line for line in text.splitlines() if line.startswith("↑ agreement"))
    task = next(line for line in text.splitlines() if line.startswith("↑ task score"))
    assert "floor over 2 runs" in agree
    assert agree.count("diverges beyond it") == 1 and agree.count("same within its own variation") == 1
    assert agree.index("diverges beyond it") < agree.index("same within its own variation")  # fp8, then seqs
    assert task.count("worse than the reference") == 1 and task.count("keeps the reference's score") == 1
    assert "quality rule:" in text
    md = comparison_text([str(tmp_path / f"{name}.json") for name, _, _ in runs], form="md")  # the report's table
    assert "| ↑ agreement (identical answers) | " in md and "| ↑ task score | " in md


def test_a_missing_or_unreadable_reference_is_one_line(mock_server, qwen3_path, tmp_path, capsys):
    mock = mock_server(answers="prompt")
    junk = tmp_path / "junk.json"
    junk.write_text("not json")
    for ref, says in ((tmp_path / "none.json", "no such result file"), (junk, "not a result JSON")):
        assert bench(mock.url, qwen3_path, tmp_path / "x.json", "--quality-reference", str(ref)) == 2
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1


def test_a_study_names_a_quality_workload_and_compare_judges_it(mock_server, qwen3_path, tmp_path):
    """Two external engines (mocks): the reference, and a lossy one whose answers are 20 % wrong."""
    from servelab.cli.compare import comparison_text

    key = tmp_path / "key.json"
    key.write_text(json.dumps(answer_key(builtin())))
    ref = mock_server(answers="prompt", answer_key=str(key))
    lossy = mock_server(answers="prompt", answer_key=str(key), corrupt_rate=0.2)
    study = tmp_path / "study.toml"
    study.write_text(f"""
[study]
name = "q"
repeats = 2

[engines.fp32]
kind = "external"
url = "{ref.url}"

[engines.fp8]
kind = "external"
url = "{lossy.url}"

[workloads.tasks]
args = ["--quality-tasks", "builtin", "--tokenizer", "{qwen3_path}", "--max-concurrency", "16", "--disable-tqdm"]

[[runs]]
engines = ["fp32", "fp8"]
workloads = ["tasks"]
""")
    assert main(["study", "run", str(study), "--results", str(tmp_path / "r"), "--no-report"]) == 0
    text = comparison_text([str(tmp_path / "r" / "q")])
    task = next(line for line in text.splitlines() if line.startswith("↑ task score"))
    agree = next(line for line in text.splitlines() if line.startswith("↑ agreement"))
    assert "100.0% [99%–100%] of 320" in task and task.endswith("worse than the reference")
    assert "floor over 2 runs" in agree and agree.endswith("diverges beyond it")
