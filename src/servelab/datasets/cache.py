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
with a note on stderr. Writes are atomic (temporary file, then rename).

Where: ``$SERVELAB_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/servelab``, else
``~/.cache/servelab``; entries live in its ``prepared/`` folder and may be deleted at
any time. ``SERVELAB_CACHE_DIR=off`` turns the cache off.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

from servelab import __version__
from servelab.config import DatasetSpec
from servelab.datasets.sample import Sample
from servelab.datasets.tokenizer import Tokenizer
from servelab.records import SampleRequest

FORMAT = 1  # bump when the file layout or any sampler's output changes without a version bump


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
        with _tee_stderr() as notes:
            requests = sample(bare, tokenizer)
        hit = (requests, notes.getvalue())
        _write(path, key, *hit)
    else:
        sys.stderr.write(hit[1])  # the notes the sampler printed when it ran (a top-up, a truncated file)
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
        entry = json.loads(path.read_text(encoding="utf-8"))
        payload = json.dumps(entry["payload"], sort_keys=True)
        if entry["key"] != key or entry["sha256"] != hashlib.sha256(payload.encode()).hexdigest():
            raise ValueError("its key or checksum does not match")
        return _decode(entry["payload"]), entry["payload"]["notes"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        print(f"servelab: note: prepared-request cache entry {path} is not usable ({exc}); rebuilding it",
              file=sys.stderr)
        return None


def _write(path: Path, key: str, requests: Sample, notes: str) -> None:
    payload = _encode(requests, notes)
    text = json.dumps({"key": key, "sha256": hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest(),
                       "payload": payload}, ensure_ascii=False)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, delete=False) as f:
            f.write(text)
        os.replace(f.name, path)
    except OSError as exc:  # a read-only home must not stop a run: it just is not cached
        print(f"servelab: note: cannot write the prepared-request cache {path.parent}: {exc}", file=sys.stderr)


def _encode(requests: Sample, notes: str) -> dict:
    rows = [[r.prompt if isinstance(r.prompt, str) else list(r.prompt), r.prompt_len, r.expected_output_len,
             r.request_id, r.timestamp_s] for r in requests]
    state = requests.arrival_state
    if state is not None:  # RandomState.get_state(): (name, uint32 key array, pos, has_gauss, cached_gaussian)
        state = [state[0], state[1].tolist(), *state[2:]]
    return {"requests": rows, "arrival_state": state, "notes": notes}


def _decode(payload: dict) -> Sample:
    import numpy as np

    requests = [SampleRequest(p if isinstance(p, str) else tuple(p), n, out, rid, ts)
                for p, n, out, rid, ts in payload["requests"]]
    state = payload["arrival_state"]
    if state is not None:
        state = (state[0], np.array(state[1], dtype=np.uint32), *state[2:])
    return Sample(requests, arrival_state=state)


def _prefixed(requests: Sample, prefix: str) -> Sample:
    if not prefix:
        return requests
    return Sample([dataclasses.replace(r, request_id=prefix + r.request_id) for r in requests],
                  arrival_state=requests.arrival_state)


@contextlib.contextmanager
def _tee_stderr():
    """Stderr still shows the sampler's notes, and they are kept for replay on a hit."""
    kept, real = io.StringIO(), sys.stderr

    class Tee(io.TextIOBase):
        def write(self, text: str) -> int:
            kept.write(text)
            return real.write(text)

    with contextlib.redirect_stderr(Tee()):
        yield kept
