"""Hostile input for every parser, made by machine (Hypothesis): the strategies and the
checks, shared by the bounded CI suites (tests/fuzz/test_fuzz_*.py, the ``ci`` profile
in tests/conftest.py) and by ``bench/fuzz.py`` (10,000 cases per parser).

What every check holds, whatever the input: no traceback. A file servelab cannot use
is one ``ServelabError`` whose message is one line naming the file (and the field where
it can); a stream servelab cannot read is a failed request with its reason. Each check
returns what became of its case ("ok", or the error class's name) so the bench can count.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

from hypothesis import strategies as st

from servelab.errors import ServelabError

# JSON values of every type, nested a little: what a "wrong type" can be
EDGES = st.sampled_from([float("inf"), -float("inf"), float("nan"), -1, 0, 2**64, 1e300, "", "\x00", [], {}])
SCALARS = st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=12) | EDGES
JSON = st.recursive(SCALARS, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids,
                                                                                        max_size=3), max_leaves=8)
NAMES = st.text(string.ascii_lowercase + "_", min_size=1, max_size=10)


def one_line_naming(exc: BaseException, name: str) -> str:
    """The error's class name, after checking it is ours, one line, and names ``name``."""
    assert isinstance(exc, ServelabError), f"{type(exc).__name__}: {exc}"
    said = str(exc)
    assert "\n" not in said and name in said, said
    return type(exc).__name__


# ---- SSE streams -> client/sse.py + client/openai.py (and the record a request becomes)

@st.composite
def events(draw, kind: str) -> bytes:
    """One ``data:`` event: a plausible chunk with any field replaced by any JSON value,
    or raw JSON of any shape, or bytes that are not JSON (nor UTF-8)."""
    shape = draw(st.sampled_from(["chunk", "json", "bytes", "done", "comment", "huge"]))
    if shape == "done":
        return b"data: [DONE]\n\n"
    if shape == "comment":
        return b": ping\n\n"
    if shape == "bytes":
        return b"data: " + draw(st.binary(max_size=40)) + b"\n\n"
    if shape == "huge":  # a big event (a long logprobs payload): 300 kB of text in one event
        chunk = {"choices": [{"text": "x" * 300_000, "delta": {"content": "y" * 10}}]}
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"
    if shape == "json":
        return b"data: " + json.dumps(draw(JSON)).encode() + b"\n\n"
    inner = {"text": "tok"} if kind == "completions" else {"delta": {"content": "tok", "reasoning": "r"}}
    chunk = {"choices": [{**inner, "finish_reason": None}], "usage": {"completion_tokens": 3, "prompt_tokens": 2}}
    path = draw(st.sampled_from(["choices", "choices.0", "choices.0.text", "choices.0.delta",
                                 "choices.0.delta.content", "choices.0.finish_reason", "usage",
                                 "usage.completion_tokens", "usage.prompt_tokens", "error", "none"]))
    _set(chunk, path, draw(JSON))
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _set(obj, path: str, value) -> None:
    """``obj`` with the value at dotted ``path`` replaced; nothing changes where an earlier
    spoiling left no container on the way (or ``path`` is "none")."""
    keys = path.split(".")
    for depth, key in enumerate(keys):
        if isinstance(obj, list) and key.isdigit() and int(key) < len(obj):
            key = int(key)
        elif not isinstance(obj, dict) or key == "none":
            return
        if depth == len(keys) - 1:
            obj[key] = value
        else:
            obj = obj[key] if isinstance(obj, list) else obj.get(key)


@st.composite
def streams(draw) -> tuple[str, bytes, list[int]]:
    """(API kind, the body's bytes, where the network cut it): any events, any line endings,
    bytes that are not UTF-8 dropped anywhere, the end possibly cut mid-event."""
    kind = draw(st.sampled_from(["completions", "chat"]))
    body = b"".join(draw(st.lists(events(kind), max_size=6)))
    if draw(st.booleans()):
        body = body.replace(b"\n", draw(st.sampled_from([b"\r\n", b"\r"])))
    if body and draw(st.booleans()):
        at = draw(st.integers(0, len(body)))
        body = body[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00"])) + body[at:]
    if body and draw(st.booleans()):
        body = body[: draw(st.integers(0, len(body)))]  # the connection closed mid-stream
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=8)))
    return kind, body, cuts


def check_stream(kind: str, body: bytes, cuts: list[int]) -> str:
    """Events do not depend on where the network cut the bytes; the request becomes a record:
    measured (with its tokens), or failed with a one-line reason."""
    from servelab.client.http import Response
    from servelab.client.sse import parse_events
    from servelab.loadgen.responses import to_record
    from servelab.loadgen.pacer import Attempt
    from servelab.records import SampleRequest

    bounds = [0, *cuts, len(body)]
    pieces = [(10 + k, body[a:b]) for k, (a, b) in enumerate(zip(bounds, bounds[1:]))]
    whole = [(e.data, e.event) for e in parse_events([(10, body)])]
    assert [(e.data, e.event) for e in parse_events(pieces)] == whole
    response = Response(status=200, reason="OK", reads=pieces, done_ns=100)
    attempt = Attempt(0, 1, 2, 3, response)
    record = to_record(kind, SampleRequest("p", 1, 4, "r0"), attempt, None)
    if record.error is not None:
        assert isinstance(record.error, str) and "\n" not in record.error and record.error, record.error
        return "failed request"
    assert record.token_ns and isinstance(record.output_tokens, int) and record.output_tokens >= 0
    assert isinstance(record.prompt_len, int)
    return "ok"


# ---- result and records files -> results/runs.py

def a_result() -> dict:
    """A small result as ``servelab bench --save-result`` writes one (the keys the readers use)."""
    return {"date": "20261202-010000", "backend": "vllm", "model_id": "m", "completed": 4, "failed": 0,
            "output_throughput": 10.0, "request_throughput": 1.0, "mean_ttft_ms": 5.0, "label": "x",
            "servelab": {"records_file": "run.records.jsonl", "simulated": False,
                         "engine": {"kind": "vllm", "memory_report": {"kv_gib": 1.0}},
                         "provenance": {"server_models": {"data": [{"id": "m", "owned_by": "vllm"}]}},
                         "telemetry": {"timeline_file": "run.timeline.jsonl"}}}


def a_record(i: int) -> dict:
    return {"request_id": f"r{i}", "success": True, "ttft_ms": 5.0, "itl_ms": [1.0, 2.0], "output_tokens": 3,
            "prompt_len": 2, "error": None}


PATHS = ["servelab", "servelab.engine", "servelab.engine.memory_report", "servelab.provenance",
         "servelab.provenance.server_models", "servelab.provenance.server_models.data", "servelab.records_file",
         "servelab.telemetry", "servelab.telemetry.timeline_file", "servelab.simulated", "label", "completed",
         "output_throughput", "none"]


@st.composite
def result_files(draw) -> tuple[bytes, bytes]:
    """(result file, records file): valid ones with a field of the wrong type, cut short,
    or with bytes that are not UTF-8; records lines of any JSON."""
    result = a_result()
    for _ in range(draw(st.integers(0, 3))):
        _set(result, draw(st.sampled_from(PATHS)), draw(JSON))
    text = json.dumps(result).encode()
    records = b"".join(json.dumps(draw(st.one_of(st.builds(a_record, st.integers(0, 9)), JSON))).encode() + b"\n"
                       for _ in range(draw(st.integers(0, 4))))
    return _hurt(draw, text), _hurt(draw, records)


def _hurt(draw, data: bytes) -> bytes:
    """``data`` as it is, cut short (a crash mid-write), or with a byte that is not UTF-8 in it."""
    how = draw(st.sampled_from(["as is", "cut", "not utf-8"]))
    at = draw(st.integers(0, len(data)))
    if how == "cut":
        return data[:at]
    return data[:at] + b"\xff\xfe" + data[at:] if how == "not utf-8" else data


def check_result_files(folder: Path, result: bytes, records: bytes) -> str:
    """``servelab report/compare/diagnose``'s readers over the files: every field they read
    answers (wrong types read as absent) or one line names the file."""
    from servelab.results.runs import load_runs, read_result

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "run.json"
    path.write_bytes(result)
    (folder / "run.records.jsonl").write_bytes(records)
    try:
        read_result(path)
        runs = load_runs([path])
    except ServelabError as exc:
        return one_line_naming(exc, str(path))
    for run in runs:
        assert isinstance(run.servelab, dict) and isinstance(run.engine, dict)
        assert isinstance(run.simulated, bool) and isinstance(run.memory(), dict)
        assert all(isinstance(row, dict) for row in run.records())
        assert isinstance(run.prompts(), list)
        run.timeline_path()
    return "ok"


# ---- study TOML -> study/file.py

def a_study() -> dict:
    """A small valid study (one engine, one workload), as a dict to be spoiled and written as TOML."""
    return {"study": {"name": "s", "repeats": 1, "seed": 0, "warmup": 0, "port": 8100, "results": "results"},
            "engines": {"e": {"embedded": True, "args": ["--max-num-seqs", "2"], "description": "d"}},
            "workloads": {"w": {"dataset-name": "random", "num-prompts": 4, "random-input-len": 8,
                                "random-output-len": 4, "max-concurrency": 2}},
            "runs": [{"engines": ["e"], "workloads": ["w"]}]}


STUDY_PATHS = ["study", "study.name", "study.repeats", "study.seed", "study.warmup", "study.port", "study.results",
               "study.starts", "study.description", "engines", "engines.e", "engines.e.embedded", "engines.e.args",
               "engines.e.command", "engines.e.env", "engines.e.port", "workloads", "workloads.w",
               "workloads.w.num-prompts", "workloads.w.dataset-name", "workloads.w.max-concurrency",
               "workloads.w.request-rate", "runs", "runs.0", "runs.0.engines", "extra"]
TOML_VALUES = st.recursive(st.booleans() | st.integers(-2**63, 2**63 - 1) | st.floats() | st.text(max_size=12),
                           lambda kids: st.lists(kids, max_size=3) | st.dictionaries(NAMES, kids, max_size=3),
                           max_leaves=6)


def toml_text(value, key: str = "") -> str:
    """``value`` (a dict) as TOML: scalars, arrays and inline tables (enough for these cases)."""
    return "".join(f"{json.dumps(k)} = {_toml(v)}\n" for k, v in value.items())


def _toml(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if v != v else ("inf" if v == float("inf") else "-inf" if v == -float("inf") else repr(v))
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(x)}" for k, x in v.items()) + "}"
    return json.dumps(v) if isinstance(v, str) else str(v)


@st.composite
def study_files(draw) -> bytes:
    """A valid study with fields of the wrong type, unknown fields, or cut short."""
    study = a_study()
    for _ in range(draw(st.integers(0, 3))):
        _set(study, draw(st.sampled_from(STUDY_PATHS)), draw(TOML_VALUES))
    return _hurt(draw, toml_text(study).encode())


def check_study_file(folder: Path, text: bytes) -> str:
    from servelab.study.file import load_study

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "fuzz.toml"
    path.write_bytes(text)
    try:
        load_study(path)
    except ServelabError as exc:
        return one_line_naming(exc, path.name)
    return "ok"


# ---- dataset files -> datasets/ (custom JSONL, ShareGPT JSON, timed_trace JSONL, BurstGPT CSV)

class ByteTokenizer:
    """A stand-in for the real tokenizer (datasets.Tokenizer's face): one id per UTF-8 byte.
    The parsers under test do not depend on which tokenizer counts; the real Qwen3 one costs
    2.7 s per timed-trace file here (a set of its 151k ids), which 10,000 cases cannot pay."""

    name, vocab_size, special_ids, num_special_tokens, source_files = "bytes", 256, frozenset({0}), 0, ()

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(text.encode("utf-8", errors="replace"))

    def encode_batch(self, texts: list[str], add_special_tokens: bool = False) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def decode(self, ids: list[int]) -> str:
        return bytes(i % 256 for i in ids).decode("utf-8", errors="replace")

    def decode_batch(self, batch: list[list[int]]) -> list[str]:
        return [self.decode(ids) for ids in batch]

    def vocab_ids(self) -> list[int]:
        return list(range(256))

    def apply_chat_template(self, prompt, system: str | None = None, **template_kwargs) -> str:
        return f"<user>{prompt}</user>"


def _custom(draw) -> bytes:
    row = draw(st.sampled_from([{"prompt": "hello there", "output_tokens": 4},
                                {"messages": [{"role": "user", "content": "hello there"}], "output_tokens": 4}]))
    rows = [json.loads(json.dumps(row)) for _ in range(draw(st.integers(1, 3)))]
    _set(rows[0], draw(st.sampled_from(["prompt", "output_tokens", "messages", "messages.0", "messages.0.role",
                                        "messages.0.content", "none"])), draw(JSON))
    return b"".join(json.dumps(draw(st.one_of(st.just(r), JSON))).encode() + b"\n" for r in rows)


def _sharegpt(draw) -> bytes:
    entry = {"id": "a", "conversations": [{"from": "human", "value": "hi there, how are you?"},
                                          {"from": "gpt", "value": "very well, and you?"}]}
    _set(entry, draw(st.sampled_from(["conversations", "conversations.0", "conversations.1.value", "id", "none"])),
         draw(JSON))
    return json.dumps([entry, *draw(st.lists(JSON, max_size=2))]).encode()


def _timed_trace(draw) -> bytes:
    row = {"input_length": 20, "output_length": 4, "timestamp": 0.5, "hash_ids": [1, 2]}
    _set(row, draw(st.sampled_from(["input_length", "output_length", "timestamp", "hash_ids", "none"])),
         draw(JSON))
    return json.dumps(draw(st.one_of(st.just(row), JSON))).encode() + b"\n"


def _burstgpt(draw) -> bytes:
    cells = draw(st.lists(st.text(string.printable, max_size=6), min_size=3, max_size=3))
    return ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
            f"1,GPT-4,{cells[0]},{cells[1]},3,Conversation log\n0,{cells[2]},5,6,11,x\n").encode()


DATASETS = {"custom": (_custom, "jsonl"), "sharegpt": (_sharegpt, "json"), "timed_trace": (_timed_trace, "jsonl"),
            "burstgpt": (_burstgpt, "csv")}


@st.composite
def dataset_files(draw) -> tuple[str, bytes]:
    name = draw(st.sampled_from(sorted(DATASETS)))
    return name, _hurt(draw, DATASETS[name][0](draw))


def check_dataset_file(folder: Path, name: str, data: bytes, tokenizer) -> str:
    from servelab.config import DatasetSpec
    from servelab.datasets import sample_requests

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"fuzz.{DATASETS[name][1]}"
    path.write_bytes(data)
    spec = DatasetSpec(name=name, path=str(path), num_prompts=3, custom_output_len=-1, timed_trace_chunk_hash_size=4)
    try:
        requests = sample_requests(spec, tokenizer).requests
    except ServelabError as exc:
        return one_line_naming(exc, path.name)
    assert all(r.prompt_len >= 0 and r.expected_output_len >= 0 for r in requests)
    return "ok"
