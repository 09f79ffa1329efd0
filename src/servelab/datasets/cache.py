"""Prepared requests kept on disk, so a repeated run does not tokenize its dataset again.

Preparing 2,000 ShareGPT prompts means parsing a 125 MB JSON file and tokenizing
thousands of conversations (~2.5 s); reading them back is a few milliseconds.

The key is a SHA-256 over everything the requests depend on: the dataset file's
content hash (never its name or date), the tokenizer's files (vocabulary, merges,
chat template), every field of the dataset spec except the request-id prefix (ids are
re-prefixed on the way out: vLLM draws a fresh prefix per run), and servelab's
version plus this format's number (a sampler that changed behaviour ships a new
version). The cache is checked, not trusted: an entry is used only if its stored key
equals the one just computed *and* its payload's own SHA-256 matches; anything else
(an unreadable, truncated or edited file, a different key) is rebuilt and rewritten,
with a note on stderr. Writes are atomic (temporary file, then rename). The payload is
columns with each distinct prompt stored once, so an oversampled 500k-request entry
costs little to read and its requests share their prompt strings again.

Where: ``$SERVELAB_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/servelab``, else
``~/.cache/servelab``; entries live in its ``prepared/`` folder and may be deleted at
any time. ``SERVELAB_CACHE_DIR=off`` turns the cache off.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

from servelab import __version__
from servelab.config import DatasetSpec
from servelab.datasets import notes
from servelab.datasets.sample import Sample
from servelab.datasets.tokenizer import Tokenizer
from servelab.records import SampleRequest

FORMAT = 2  # bump when the file layout or any sampler's output changes without a version bump


def cache_dir() -> Path | None:
    """The cache folder, or None when the cache is off."""
    value = os.environ.get("SERVELAB_CACHE_DIR")
    if value:
        return None if value.lower() == "off" else Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base).expanduser() if base else Path.home() / ".cache") / "servelab"


def cached(spec: DatasetSpec, tokenizer: Tokenizer, sample) -> Sample:
    """``sample(spec, tokenizer)``, read from the cache when a checked entry exists."""
    folder = cache_dir()
    prefix = spec.request_id_prefix or ""
    if folder is None:
        return sample(spec, tokenizer)
    bare = dataclasses.replace(spec, request_id_prefix="")
    key = cache_key(bare, tokenizer)
    path = folder / "prepared" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"
    hit = _read(path, key)
    if hit is None:
        with notes.collect() as said:
            requests = sample(bare, tokenizer)
        hit = (requests, "".join(line + "\n" for line in said))
        _write(path, key, *hit)
    else:
        for line in hit[1].splitlines():  # the notes the sampler said when it ran (a top-up, the bundled copy)
            notes.say(line)
    return _prefixed(hit[0], prefix)


def cache_key(spec: DatasetSpec, tokenizer: Tokenizer) -> str:
    """What the prepared requests depend on, as one canonical JSON string."""
    fields = dataclasses.asdict(spec)
    fields["path"] = dataset_digest(spec) if spec.path else None
    return json.dumps({"servelab": __version__, "format": FORMAT, "spec": fields,
                       "tokenizer": [file_digest(p) for p in tokenizer.source_files]}, sort_keys=True)


def dataset_digest(spec: DatasetSpec) -> str:
    """SHA-256 of what the sampler reads: its file, or (hf) every file of its folder by relative name."""
    path = Path(spec.path)
    if spec.name != "hf" or not path.is_dir():
        return file_digest(dataset_file(spec))
    files = sorted(p for p in path.rglob("*") if p.is_file())
    listing = "".join(f"{p.relative_to(path)}\t{file_digest(p)}\n" for p in files)
    return hashlib.sha256(listing.encode()).hexdigest()


def dataset_file(spec: DatasetSpec) -> Path:
    # speed_bench's path is a folder; the subset's file is what it reads
    path = Path(spec.path)
    return path / f"{spec.speed_bench_dataset_subset}.jsonl" if path.is_dir() else path


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes ("missing" when absent: the sampler will say so)."""
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return "missing"


def _read(path: Path, key: str) -> tuple[Sample, str] | None:
    """The entry at ``path`` if it is whole and made for ``key``; else None (with a note)."""
    try:
        with open(path, "rb") as f:
            head, body = json.loads(f.readline()), f.read()
        if head["key"] != key or head["sha256"] != hashlib.sha256(body).hexdigest():
            raise ValueError("its key or checksum does not match")
        payload = json.loads(body)
        return _decode(payload), payload["notes"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        print(f"servelab: note: prepared-request cache entry {path} is not usable ({exc}); rebuilding it",
              file=sys.stderr)
        return None


def _write(path: Path, key: str, requests: Sample, notes: str) -> None:
    """Two lines: the key and the payload's SHA-256, then the payload (checked as bytes,
    never re-serialized: a 500k-request entry is read once)."""
    body = json.dumps(_encode(requests, notes), ensure_ascii=False).encode()
    head = json.dumps({"key": key, "sha256": hashlib.sha256(body).hexdigest()}).encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("wb", dir=path.parent, delete=False) as f:
            f.write(head + b"\n" + body)
        os.replace(f.name, path)
    except OSError as exc:  # a read-only home must not stop a run: it just is not cached
        print(f"servelab: note: cannot write the prepared-request cache {path.parent}: {exc}", file=sys.stderr)


def _encode(sample: Sample, notes: str) -> dict:
    """Columns, each prompt once: an oversampled run repeats a few prompts many times, and
    read back they are shared again, not one string per request."""
    requests = sample.requests
    where: dict = {}
    index = [where.setdefault(r.prompt, len(where)) for r in requests]
    prompts = [p if isinstance(p, str) else list(p) for p in where]
    state = sample.arrival_state
    if state is not None:  # RandomState.get_state(): (name, uint32 key array, pos, has_gauss, cached_gaussian)
        state = [state[0], state[1].tolist(), *state[2:]]
    return {"prompts": prompts, "prompt": index, "prompt_len": [r.prompt_len for r in requests],
            "output_len": [r.expected_output_len for r in requests],
            "request_id": [r.request_id for r in requests], "timestamp_s": [r.timestamp_s for r in requests],
            "arrival_state": state, "notes": notes}


def _decode(payload: dict) -> Sample:
    import numpy as np

    prompts = [p if isinstance(p, str) else tuple(p) for p in payload["prompts"]]
    columns = (payload["prompt"], payload["prompt_len"], payload["output_len"], payload["request_id"],
               payload["timestamp_s"])
    if len({len(c) for c in columns}) != 1:
        raise ValueError("its columns differ in length")
    requests = [SampleRequest(prompts[i], n, out, rid, ts) for i, n, out, rid, ts in zip(*columns)]
    state = payload["arrival_state"]
    if state is not None:
        state = (state[0], np.array(state[1], dtype=np.uint32), *state[2:])
    return Sample.of(requests, arrival_state=state)


def _prefixed(sample: Sample, prefix: str) -> Sample:
    if not prefix:
        return sample
    return Sample.of([dataclasses.replace(r, request_id=prefix + r.request_id) for r in sample.requests],
                     arrival_state=sample.arrival_state)
