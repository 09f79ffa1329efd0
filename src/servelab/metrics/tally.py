"""Every request of a run in a few integers: what the summary needs, added one record at a time.

A run hands each record here as it completes and lets it go, so memory does not grow
with what a record carries (token tuples, texts, raw responses). Per request: its
instants (int64 ns), lengths and flags in numpy columns indexed by its place in the
run's requests (~75 B), plus each gap between its token-bearing events in one pool of
``uint32`` (4 B a token), grown a fixed block at a time: a growing array would be
copied on each reallocation, and on a busy heap leave its old copies as holes. Nothing is binned: percentiles stay exact, and
``record(i)`` rebuilds request ``i``'s record exactly (its text only when ``detailed``).

Kept aside because they are rare: failed requests' events and error texts, events
that carry several tokens (their counts), and gaps of 2**32 ns (4.3 s) or more.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from servelab.records import RequestRecord

NS_PER_S = 1_000_000_000
OK, FAILED = 1, 2  # a request's state in the tally (0: not added)
_BIG = 0xFFFFFFFF  # a gap this long or longer is kept exactly in ``big``, apart
_SOURCES = ("usage", "tokenizer", "events")
_PROMPT_SOURCES = ("dataset", "usage")
_CHUNK = 1 << 13  # requests at a time when the token instants are rebuilt (peak output bins)
_BLOCK_BITS = 20  # gaps per block of the pool: 2**20 (4 MB)
_BLOCK = 1 << _BLOCK_BITS
# RequestRecord's fields the tally has no column for (added by later features): kept per
# request only where they differ from their default, so a new field costs nothing until
# it is used, and ``record(i)`` stays exact
_KEPT = {"request_id", "prompt_len", "expected_output_len", "intended_ns", "dispatched_ns", "sent_ns", "done_ns",
         "token_ns", "token_counts", "output_tokens", "output_tokens_source", "generated_text", "error",
         "http_status", "finished", "prompt_len_source"}
_OTHER = {f.name: f.default for f in dataclasses.fields(RequestRecord) if f.name not in _KEPT}
_COLUMNS = {"status": np.int8, "intended_ns": np.int64, "dispatched_ns": np.int64, "sent_ns": np.int64,
            "done_ns": np.int64, "first_ns": np.int64, "last_ns": np.int64, "prompt_len": np.int32,
            "output_tokens": np.int32, "events": np.int32, "gap_at": np.int64, "finished": np.bool_,
            "source": np.int8, "prompt_source": np.int8, "http_status": np.int16}


class Tally:
    """The run's requests, ``requests[i]`` giving request ``i``'s id and lengths (a
    ``SampleRequest`` or anything with those attributes)."""

    def __init__(self, requests: Sequence, detailed: bool = False) -> None:
        self.requests, self.detailed = requests, detailed
        self.col = {name: np.zeros(len(requests), dtype) for name, dtype in _COLUMNS.items()}
        self.blocks: list[np.ndarray] = []  # successful requests' event gaps, in the order they were added
        self.n_gaps = 0
        self.big: dict[int, int] = {}  # position in ``gaps`` -> the gap, where it is ≥ _BIG
        self.counts: dict[int, tuple[int, ...]] = {}  # request -> tokens per event, where one carried > 1
        self.failed_events: dict[int, tuple[int, ...]] = {}  # failed request -> its event instants
        self.errors: dict[int, str] = {}
        self.texts: dict[int, str] = {}  # only when ``detailed``
        self._error_texts: dict[str, str] = {}  # one string per distinct error
        self.other: dict[str, dict[int, object]] = {name: {} for name in _OTHER}
        self.added = 0

    def add(self, i: int, r: RequestRecord) -> None:
        """Request ``i`` ended as ``r`` (a run's sink, results/store.RecordSink, adds it here)."""
        c = self.col
        c["status"][i] = OK if r.success else FAILED
        for name in ("intended_ns", "dispatched_ns", "sent_ns", "done_ns", "prompt_len", "output_tokens"):
            c[name][i] = getattr(r, name)
        c["finished"][i], c["http_status"][i] = r.finished, r.http_status or 0
        c["source"][i] = _SOURCES.index(r.output_tokens_source)
        c["prompt_source"][i] = _PROMPT_SOURCES.index(r.prompt_len_source)
        c["events"][i] = len(r.token_ns)
        if r.token_ns:
            c["first_ns"][i], c["last_ns"][i] = r.token_ns[0], r.token_ns[-1]
        if any(k != 1 for k in r.token_counts):
            self.counts[i] = tuple(r.token_counts)
        if self.detailed and r.generated_text:
            self.texts[i] = r.generated_text
        for name, default in _OTHER.items():
            value = getattr(r, name)
            if value != default:
                self.other[name][i] = value
        self.added += 1
        if r.success:
            self._add_gaps(i, r.token_ns)
        else:
            self.errors[i] = self._error_texts.setdefault(r.error, r.error)
            self.failed_events[i] = tuple(r.token_ns)

    def _add_gaps(self, i: int, t: tuple[int, ...]) -> None:
        at = self.col["gap_at"][i] = self.n_gaps
        gaps = [b - a for a, b in zip(t, t[1:])]
        if gaps and max(gaps) >= _BIG:
            self.big.update((at + k, g) for k, g in enumerate(gaps) if g >= _BIG)
            gaps = [min(g, _BIG) for g in gaps]
        done = 0
        while done < len(gaps):
            b, off = divmod(self.n_gaps, _BLOCK)
            if b == len(self.blocks):
                self.blocks.append(np.empty(_BLOCK, np.uint32))
            n = min(len(gaps) - done, _BLOCK - off)
            self.blocks[b][off:off + n] = gaps[done:done + n]
            done += n
            self.n_gaps += n

    def pool(self) -> list[np.ndarray]:
        """The pooled gaps, block by block (views; the last one trimmed)."""
        full, rest = divmod(self.n_gaps, _BLOCK)
        return self.blocks[:full] + ([self.blocks[full][:rest]] if rest else [])

    def gaps_at(self, pos: np.ndarray) -> np.ndarray:
        """The pooled gaps at positions ``pos`` (int64), the long ones exactly."""
        out = np.empty(len(pos), np.int64)
        block = pos >> _BLOCK_BITS
        for b in np.unique(block):
            here = block == b
            out[here] = self.blocks[b][pos[here] & (_BLOCK - 1)]
        for k, g in self.big.items():
            out[pos == k] = g
        return out

    def keep(self, n: int) -> None:
        """Only the first ``n`` requests were the run's (recycled lanes take sessions in order
        until a deadline: the rest were drawn ahead and never taken); none after them was added."""
        assert not self.col["status"][n:].any(), "a request past the ones kept was added"
        self.requests = self.requests[:n]
        self.col = {name: col[:n].copy() for name, col in self.col.items()}

    # ---- reading back ---------------------------------------------------------------

    def mask(self, state: int) -> np.ndarray:
        return self.col["status"] == state

    def indices(self) -> np.ndarray:
        """Every added request, in the run's order."""
        return np.flatnonzero(self.col["status"])

    def lag_ns(self) -> np.ndarray:
        """Every added request's schedule lag (dispatched − intended)."""
        idx = self.indices()
        return self.col["dispatched_ns"][idx] - self.col["intended_ns"][idx]

    def sources(self) -> list[str]:
        """Where successful requests' output token counts came from."""
        return sorted(_SOURCES[k] for k in np.unique(self.col["source"][self.mask(OK)]))

    def dispatched_ns(self, i: int, default: int) -> int:
        """When request ``i`` was dispatched, or ``default`` if it never was."""
        return int(self.col["dispatched_ns"][i]) if self.col["status"][i] else default

    def prompt_sources(self) -> list[str]:
        """Where successful requests' prompt lengths came from (the server's usage or the dataset)."""
        return sorted(_PROMPT_SOURCES[k] for k in np.unique(self.col["prompt_source"][self.mask(OK)]))

    def records_with(self, field: str) -> list[RequestRecord]:
        """The records of the requests whose ``field`` (a rarely set one, such as
        ``first_reasoning_ns``) is not its default: only those are rebuilt."""
        return [self.record(i) for i in sorted(self.other[field])]

    def unfinished(self) -> int:
        """Successes whose stream ended with neither a finish_reason nor [DONE]."""
        return int((self.mask(OK) & ~self.col["finished"]).sum())

    def failures(self) -> list[tuple[str, str]]:
        """(request id, error) of every failed request, in the run's order."""
        return [(self.requests[i].request_id, self.errors[i]) for i in sorted(self.errors)]

    def token_ns(self, i: int) -> tuple[int, ...]:
        if self.col["status"][i] == FAILED:
            return self.failed_events[i]
        n = int(self.col["events"][i])
        if n == 0:
            return ()
        at, first = int(self.col["gap_at"][i]), int(self.col["first_ns"][i])
        gaps = self.gaps_at(np.arange(at, at + n - 1, dtype=np.int64)).tolist()
        out, t = [first], first
        for g in gaps:
            t += g
            out.append(t)
        return tuple(out)

    def record(self, i: int) -> RequestRecord:
        """Request ``i``'s record as it was added (its text only when ``detailed``)."""
        c, req = self.col, self.requests[i]
        events = self.token_ns(i)
        return RequestRecord(
            request_id=req.request_id, prompt_len=int(c["prompt_len"][i]),
            expected_output_len=req.expected_output_len, intended_ns=int(c["intended_ns"][i]),
            dispatched_ns=int(c["dispatched_ns"][i]), sent_ns=int(c["sent_ns"][i]), done_ns=int(c["done_ns"][i]),
            token_ns=events, token_counts=self.counts.get(i, (1,) * len(events)),
            output_tokens=int(c["output_tokens"][i]), output_tokens_source=_SOURCES[c["source"][i]],
            prompt_len_source=_PROMPT_SOURCES[c["prompt_source"][i]],
            generated_text=self.texts.get(i, ""), error=self.errors.get(i),
            http_status=int(c["http_status"][i]) or None, finished=bool(c["finished"][i]),
            **{name: self.other[name].get(i, default) for name, default in _OTHER.items()})

    def records(self) -> list[RequestRecord]:
        """Every record, rebuilt (for small runs and tests: a big run reads the columns)."""
        return [self.record(int(i)) for i in self.indices()]

    def token_instants(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The events of successful requests ``idx``: their instants (int64 ns) and the
        tokens each carried, rebuilt from first instants and pooled gaps."""
        c = self.col
        lens = c["events"][idx].astype(np.int64)
        idx, lens = idx[lens > 0], lens[lens > 0]
        if not len(idx):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
        steps = np.zeros(int(lens.sum()), np.int64)
        pos = np.repeat(c["gap_at"][idx] - starts - 1, lens) + np.arange(len(steps))  # gap before event
        inner = np.ones(len(steps), bool)
        inner[starts] = False
        steps[inner] = self.gaps_at(pos[inner])
        # each request's first instant replaces the running sum at its start
        firsts = c["first_ns"][idx]
        steps[starts] = firsts - np.concatenate([[0], c["last_ns"][idx][:-1]])
        weights = np.ones(len(steps), np.int64)
        if self.counts:
            for j in np.flatnonzero(np.isin(idx, list(self.counts))):
                weights[starts[j]:starts[j] + lens[j]] = self.counts[int(idx[j])]
        return np.cumsum(steps), weights

    def peak_bins(self, anchor_ns: int) -> np.ndarray:
        """Output tokens per 1-second bin from ``anchor_ns``, over successful requests."""
        ok = np.flatnonzero(self.mask(OK))
        bins = np.zeros(0, np.int64)
        for k in range(0, len(ok), _CHUNK):
            times, weights = self.token_instants(ok[k:k + _CHUNK])
            b = (times - anchor_ns) // NS_PER_S
            keep = b >= 0
            part = np.bincount(b[keep], weights=weights[keep]).astype(np.int64)
            if len(part) > len(bins):
                bins = np.concatenate([bins, np.zeros(len(part) - len(bins), np.int64)])
            bins[:len(part)] += part
        return bins

    def split_gaps_needed(self) -> bool:
        """Some gap is not a plain pooled value: split by tokens, or kept apart."""
        return bool(self.big) or any(self.col["status"][i] == OK for i in self.counts)
