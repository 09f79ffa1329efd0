"""The digest: responses are packed, then parsed, during the run only above watermarks
(or past an age), in slices; a short run parses after it ends, as before."""

import asyncio
import time

from servelab.client.http import Response
from servelab.loadgen import digest as digest_module
from servelab.loadgen.digest import Digest, pack, size, unpack
from servelab.loadgen.pacer import Attempt


def attempt(i: int, pieces: int = 5, age_s: float = 0.0) -> Attempt:
    done = time.perf_counter_ns() - int(age_s * 1e9)
    reads = [(done - 1000 * (pieces - k), f"data: {{\"n\": {i}, \"k\": {k}}}\n\n".encode() * 8) for k in range(pieces)]
    return Attempt(i, 0, 0, 0, Response(status=200, headers={"a": "b"}, reads=reads, done_ns=done))


UNIT = size(attempt(0))


def run_with(digest: Digest, pushes, turns: int = 20) -> None:
    """Push while the digest's task runs, give the loop ``turns`` turns, stop it."""

    async def main():
        task = asyncio.ensure_future(digest.run())
        for a in pushes:
            digest.push(a)
            await asyncio.sleep(0)
        for _ in range(turns):
            await asyncio.sleep(0)
        task.cancel()

    asyncio.run(main())


def reads_seen(made: list):
    return lambda a: made.append((a.index, list(a.response.reads)))


def test_a_packed_response_unpacks_to_its_pieces():
    a = attempt(3)
    pieces = list(a.response.reads)
    packed = pack(a)
    assert a.response.reads == [] and a.response.headers == {}  # let go
    assert unpack(packed) == pieces and len(packed[0]) < sum(len(p) for _, p in pieces) / 3


def test_below_the_watermark_nothing_happens_until_the_run_ends():
    made = []
    digest = Digest(lambda a: a.index, lambda i, r: made.append(i), raw_low=10 * UNIT)
    run_with(digest, [attempt(i) for i in range(10)])
    assert made == [] and digest.raw == 10 * UNIT and digest.packed == 0  # weighed, nothing more
    digest.flush()
    assert made == list(range(10)) and digest.pending == 0


def test_above_the_raw_watermark_the_oldest_are_packed_not_parsed():
    made, attempts = [], [attempt(i) for i in range(10)]
    originals = [list(a.response.reads) for a in attempts]
    digest = Digest(reads_seen(made), lambda i, r: None, raw_low=3 * UNIT, packed_low=1 << 30)
    run_with(digest, attempts)
    assert made == [] and digest.raw == 3 * UNIT and 0 < digest.packed < 7 * UNIT / 3
    digest.flush()
    assert made == list(enumerate(originals))  # in completion order, each as it arrived


def test_above_the_packed_watermark_the_oldest_are_parsed_while_the_run_goes_on():
    made = []
    digest = Digest(lambda a: a.index, lambda i, r: made.append(i), raw_low=0, packed_low=0)
    run_with(digest, [attempt(i) for i in range(10)])
    assert made == list(range(10)) and digest.pending == 0


def test_push_only_appends_and_the_digest_works_one_slice_per_turn_of_the_loop():
    slow = []

    def convert(a):
        time.sleep(0.002)  # a parse far longer than the slice
        return a.index

    digest = Digest(convert, lambda i, r: slow.append(i), raw_low=0, packed_low=0, slice_ns=1)

    async def main():
        for i in range(4):
            digest.push(attempt(i))
        assert digest.pending == 0  # nothing weighed, packed or parsed on the completion path
        task = asyncio.ensure_future(digest.run())
        seen = []
        for _ in range(7):
            await asyncio.sleep(0)  # one turn of the loop: one step of the digest, then it yields
            seen.append(list(slow))
        task.cancel()
        return seen

    # four turns weigh (and pack) one response each, then one parse per turn
    assert asyncio.run(main()) == [[], [], [], [], [0], [0, 1], [0, 1, 2]]


def test_a_client_too_busy_to_keep_up_does_the_work_in_push(monkeypatch):
    monkeypatch.setattr(digest_module, "MAX_NEW", 2)
    made = []
    digest = Digest(lambda a: a.index, lambda i, r: made.append(i), raw_low=0, packed_low=0, ceiling=1)
    for i in range(5):
        digest.push(attempt(i))  # no loop running: only push itself can work
    assert made == [0, 1, 2] and len(digest._new) == 2


def test_past_max_age_a_response_is_parsed_whatever_the_watermarks(monkeypatch):
    made = []
    digest = Digest(lambda a: a.index, lambda i, r: made.append(i), raw_low=1 << 40, max_age_ns=50_000_000)
    old, fresh = attempt(0, age_s=1.0), attempt(1)
    # the digest's clock stands still at the fresh one's end, however slowly this test runs
    clock = [fresh.response.done_ns]
    monkeypatch.setattr(digest_module, "_now", lambda: clock[0])
    run_with(digest, [old, fresh], turns=5)
    assert made == [0]  # the old one; the fresh one waits for its age
    clock[0] += 50_000_001
    run_with(digest, [], turns=5)
    assert made == [0, 1]  # ... and is parsed once past it
