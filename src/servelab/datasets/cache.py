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
the requests' own columns (datasets/requests.py: one prompt buffer, each distinct prompt
once, int columns) as raw bytes, read back as views of the file's bytes: a 500k-request
entry is one read, no object per request.

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
from servelab.datasets.requests import Requests, from_bytes
from servelab.datasets.sample import Sample
from servelab.datasets.tokenizer import Tokenizer

FORMAT = 3  # bump when the file layout or any sampler's output changes without a version bump


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
    path = folder / "prepared" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.bin"
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
        return _decode(body)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        print(f"servelab: note: prepared-request cache entry {path} is not usable ({exc}); rebuilding it",
              file=sys.stderr)
        return None


def _write(path: Path, key: str, requests: Sample, notes: str) -> None:
    """Two lines: the key and the payload's SHA-256, then the payload (checked as bytes,
    never re-serialized: a 500k-request entry is read once)."""
    body = _encode(requests, notes)
    digest = hashlib.sha256()
    for piece in body:
        digest.update(piece)
    head = json.dumps({"key": key, "sha256": digest.hexdigest()}).encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("wb", dir=path.parent, delete=False) as f:
            f.write(head + b"\n")
            for piece in body:
                f.write(piece)
        os.replace(f.name, path)
    except OSError as exc:  # a read-only home must not stop a run: it just is not cached
        print(f"servelab: note: cannot write the prepared-request cache {path.parent}: {exc}", file=sys.stderr)


def _encode(sample: Sample, notes: str) -> list:
    """A JSON line (the notes, the arrival state), then the requests' columns as raw bytes
    (datasets/requests.py): read back as views of the file's bytes, no object per request."""
    state = sample.arrival_state
    if state is not None:  # RandomState.get_state(): (name, uint32 key array, pos, has_gauss, cached_gaussian)
        state = [state[0], state[1].tolist(), *state[2:]]
    meta = json.dumps({"arrival_state": state, "notes": notes}, ensure_ascii=False).encode()
    return [meta + b"\n", *Requests.of(sample.requests).pieces()]


def _decode(body: bytes) -> tuple[Sample, str]:
    import numpy as np

    newline = body.find(b"\n")
    meta = json.loads(body[:newline])
    state = meta["arrival_state"]
    if state is not None:
        state = (state[0], np.array(state[1], dtype=np.uint32), *state[2:])
    return Sample(from_bytes(memoryview(body)[newline + 1:]), arrival_state=state), meta["notes"]


def _prefixed(sample: Sample, prefix: str) -> Sample:
    if not prefix:
        return sample
    return Sample(Requests.of(sample.requests).with_prefix(prefix), arrival_state=sample.arrival_state)
