"""A run's requests as a few columns, not one Python object per request.

500,000 ``SampleRequest``s with their prompt and id strings cost ~280 B each (140 MB),
more than the run's whole tally. Here every prompt is a span of one UTF-8 buffer
(token-id prompts: of one int32 buffer), a prompt repeated by oversampling points at
the same span, ids are ``prefix + str(number)`` from an int64 column when they are
numbered (every sampler numbers them), and lengths are int32 columns: ~110 B a random
16-token prompt, its text included. ``requests[i]`` builds request ``i``'s
``SampleRequest`` when it is asked for (~1 µs: a sender asks once, at send time), so
whoever reads a list of requests reads this unchanged; a slice is a view sharing the
buffer.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Iterable, Sequence

import numpy as np

from servelab.records import SampleRequest

NO_OUTPUT_LEN = -1  # expected_output_len None: the server decides


class Requests(Sequence):
    """Columns: ``spans`` (start, end) into ``prompts`` (bytes of UTF-8, or an int32 array of
    token ids when ``ids_prompts``), ``prompt_len``, ``output_len``, ``timestamp_s`` (or None),
    and the ids: ``numbers`` (int64, id = prefix + str) or, when not numbered, ``names``."""

    __slots__ = ("prompts", "ids_prompts", "spans", "prompt_len", "output_len", "timestamp_s", "numbers",
                 "names", "prefix")

    def __init__(self, prompts, spans: np.ndarray, prompt_len: np.ndarray, output_len: np.ndarray, *,
                 ids_prompts: bool = False, timestamp_s: np.ndarray | None = None,
                 numbers: np.ndarray | None = None, names: list[str] | None = None, prefix: str = "") -> None:
        self.prompts, self.ids_prompts, self.spans = prompts, ids_prompts, spans
        self.prompt_len, self.output_len, self.timestamp_s = prompt_len, output_len, timestamp_s
        self.numbers, self.names, self.prefix = numbers, names, prefix

    @classmethod
    def of(cls, requests: Iterable[SampleRequest]) -> Requests:
        """Columns of ``requests`` (already columns: themselves)."""
        if isinstance(requests, Requests):
            return requests
        builder = Builder()
        for r in requests:
            builder.add(r)
        return builder.build()

    def __len__(self) -> int:
        return len(self.prompt_len)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self._view(i)
        start, end = (int(x) for x in self.spans[i])
        if self.ids_prompts:
            prompt = tuple(self.prompts[start:end].tolist())
        else:
            prompt = str(self.prompts[start:end], "utf-8")
        out = int(self.output_len[i])
        ts = None if self.timestamp_s is None or math.isnan(self.timestamp_s[i]) else float(self.timestamp_s[i])
        return SampleRequest(prompt, int(self.prompt_len[i]), None if out == NO_OUTPUT_LEN else out,
                             self.request_id(i), ts)

    def request_id(self, i: int) -> str:
        return self.prefix + (str(int(self.numbers[i])) if self.numbers is not None else self.names[i])

    def __eq__(self, other) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None

    def __repr__(self) -> str:
        return f"Requests({len(self)} requests)"

    def _view(self, s: slice) -> Requests:
        return Requests(self.prompts, self.spans[s], self.prompt_len[s], self.output_len[s],
                        ids_prompts=self.ids_prompts,
                        timestamp_s=None if self.timestamp_s is None else self.timestamp_s[s],
                        numbers=None if self.numbers is None else self.numbers[s],
                        names=None if self.names is None else self.names[s], prefix=self.prefix)

    def topped_up(self, picks: np.ndarray) -> Requests:
        """These requests (numbered 0…n−1), then a copy of row ``picks[j]`` numbered n + j
        (oversampling: the copies share their rows' prompts)."""
        rows = np.concatenate([np.arange(len(self)), picks])
        return Requests(self.prompts, self.spans[rows], self.prompt_len[rows], self.output_len[rows],
                        ids_prompts=self.ids_prompts,
                        timestamp_s=None if self.timestamp_s is None else self.timestamp_s[rows],
                        numbers=np.arange(len(rows), dtype=np.int64), prefix=self.prefix)

    def with_prefix(self, prefix: str) -> Requests:
        """The same requests with ``prefix`` before every id (a run's fresh id prefix)."""
        view = self._view(slice(None))
        if view.numbers is not None:
            view.prefix = prefix + self.prefix
        else:
            view.names = [prefix + self.prefix + n for n in view.names]
            view.prefix = ""
        return view

    def __reduce__(self):
        """Pickled (to a worker process) as its own columns, the shared buffer cut to its spans."""
        return (from_bytes, (self.to_bytes(),))

    # ---- bytes, for the prepared-request cache ---------------------------------------

    def to_bytes(self) -> bytes:
        return b"".join(self.pieces())

    def pieces(self) -> list:
        """``to_bytes`` in pieces, written one after another with no copy of the columns:
        one JSON line (what the columns are, and the ids when not numbered), then the
        columns' raw bytes in that order; a view writes only the prompts it points at."""
        prompts, spans = self._compacted()
        columns = {"prompts": np.frombuffer(prompts, np.uint8) if not self.ids_prompts else prompts,
                   "spans": spans, "prompt_len": self.prompt_len, "output_len": self.output_len}
        if self.timestamp_s is not None:
            columns["timestamp_s"] = self.timestamp_s
        if self.numbers is not None:
            columns["numbers"] = self.numbers
        arrays = {k: np.ascontiguousarray(v) for k, v in columns.items()}
        head = {"columns": [[k, a.dtype.str, a.shape[0], a.nbytes] for k, a in arrays.items()],
                "ids_prompts": self.ids_prompts, "names": self.names, "prefix": self.prefix}
        return [json.dumps(head).encode() + b"\n", *(memoryview(a).cast("B") for a in arrays.values())]

    def _compacted(self):
        """The prompts buffer holding only this view's spans (each once), and the spans into it."""
        starts = self.spans[:, 0] if len(self) else np.zeros(0, np.int64)
        unique, back = np.unique(starts, return_inverse=True)
        if len(unique) == 0:
            return (b"" if not self.ids_prompts else np.zeros(0, np.int32)), np.zeros((0, 2), np.int64)
        ends = np.zeros(len(unique), np.int64)
        ends[back] = self.spans[:, 1]
        size = len(self.prompts)
        if unique[0] == 0 and ends[-1] == size and np.array_equal(unique[1:], ends[:-1]):
            return self.prompts, self.spans  # the buffer is these spans, each once, in order
        pieces = [self.prompts[a:b] for a, b in zip(unique.tolist(), ends.tolist())]
        sizes = ends - unique
        new_starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
        spans = np.stack([new_starts[back], new_starts[back] + sizes[back]], axis=1)
        joined = np.concatenate(pieces).astype(np.int32) if self.ids_prompts else b"".join(bytes(p) for p in pieces)
        return joined, spans


def from_bytes(body) -> Requests:
    """``Requests.to_bytes``'s columns read back as views of ``body`` (no copy); ValueError
    if they do not add up."""
    view = memoryview(body)
    newline = bytes(view[:65536]).find(b"\n") if len(view) else -1
    if newline < 0:
        raise ValueError("no column header")
    head, at, arrays = json.loads(bytes(view[:newline])), newline + 1, {}
    for name, dtype, _rows, nbytes in head["columns"]:
        piece = view[at:at + nbytes]
        if len(piece) != nbytes:
            raise ValueError(f"its column {name} is cut short")
        arrays[name] = np.frombuffer(piece, dtype=np.dtype(dtype))
        at += nbytes
    if at != len(view):
        raise ValueError("its columns and its length differ")
    prompts = arrays["prompts"] if head["ids_prompts"] else view[newline + 1:newline + 1 + arrays["prompts"].nbytes]
    n = len(arrays["prompt_len"])
    if len(arrays["output_len"]) != n or arrays["spans"].size != 2 * n:
        raise ValueError("its columns differ in length")
    return Requests(prompts, arrays["spans"].reshape(n, 2), arrays["prompt_len"], arrays["output_len"],
                    ids_prompts=head["ids_prompts"], timestamp_s=arrays.get("timestamp_s"),
                    numbers=arrays.get("numbers"), names=head["names"], prefix=head["prefix"])


class Builder:
    """Requests added one at a time into growing columns; with ``share``, a prompt object
    added again (oversampling repeats the same string) shares its span (a sampler whose
    prompts are all distinct passes False: no table of them is kept)."""

    def __init__(self, share: bool = True) -> None:
        self.share = share
        self.text, self.ids = bytearray(), array("i")
        self.spans, self.lens, self.outs = array("q"), array("i"), array("i")
        self.times: array | None = None
        self.numbers: array | None = array("q")
        self.names: list[str] = []
        self.prefix: str | None = None
        self.ids_prompts: bool | None = None
        self._seen: dict[int, tuple[int, int, object]] = {}  # id(prompt) -> its span (and the prompt, kept alive)

    def add(self, r: SampleRequest) -> None:
        self._prompt(r.prompt)
        self.lens.append(r.prompt_len)
        self.outs.append(NO_OUTPUT_LEN if r.expected_output_len is None else r.expected_output_len)
        if r.timestamp_s is not None and self.times is None:
            self.times = array("d", [math.nan] * (len(self.lens) - 1))
        if self.times is not None:
            self.times.append(math.nan if r.timestamp_s is None else r.timestamp_s)
        self._id(r.request_id)

    def _prompt(self, prompt) -> None:
        text = isinstance(prompt, str)
        if self.ids_prompts is None:
            self.ids_prompts = not text
        elif self.ids_prompts == text:
            raise ValueError("requests mix text and token-id prompts")
        seen = self._seen.get(id(prompt)) if self.share else None
        if seen is None:
            buffer = self.ids if not text else self.text
            start = len(buffer)
            if text:
                buffer += prompt.encode("utf-8")
            else:
                buffer.extend(prompt)
            seen = (start, len(buffer), prompt)
            if self.share:
                self._seen[id(prompt)] = seen
        self.spans.extend(seen[:2])

    def _id(self, rid: str) -> None:
        """Numbered ids (prefix + str(n), one prefix) as numbers; the first that is not turns
        the column into names."""
        if self.numbers is not None:
            head, tail = _split_number(rid)
            if tail is not None and (self.prefix is None or head == self.prefix):
                self.prefix = head
                self.numbers.append(tail)
                return
            self.names = [self.prefix + str(n) for n in self.numbers]
            self.numbers = None
        self.names.append(rid)

    def build(self) -> Requests:
        n = len(self.lens)
        spans = np.frombuffer(self.spans, np.int64).reshape(n, 2) if n else np.zeros((0, 2), np.int64)
        # the text stays the bytearray it was built in: a bytes copy would be a second 40 MB at 500k
        prompts = np.frombuffer(self.ids, np.int32) if self.ids_prompts else self.text
        numbers = np.frombuffer(self.numbers, np.int64) if self.numbers is not None else None
        return Requests(prompts, spans, np.frombuffer(self.lens, np.int32), np.frombuffer(self.outs, np.int32),
                        ids_prompts=bool(self.ids_prompts),
                        timestamp_s=None if self.times is None else np.frombuffer(self.times, np.float64),
                        numbers=numbers, names=None if numbers is not None else self.names,
                        prefix=(self.prefix or "") if numbers is not None else "")


def _split_number(rid: str) -> tuple[str, int | None]:
    """``"bench-ab12-17"`` → ("bench-ab12-", 17); no trailing number, or one with a leading
    zero (it would not print back the same) → (rid, None)."""
    k = len(rid)
    while k and rid[k - 1].isdigit():
        k -= 1
    tail = rid[k:]
    if not tail or (len(tail) > 1 and tail[0] == "0") or not tail.isascii():
        return rid, None
    return rid[:k], int(tail)
