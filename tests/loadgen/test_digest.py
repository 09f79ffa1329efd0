"""The digest: responses become records during the run only above a watermark (or past an
age), in slices; a short run parses after it ends, as before."""

import asyncio
import time

from servelab.client.http import Response
from servelab.loadgen.digest import Digest, size
from servelab.loadgen.pacer import Attempt


def attempt(i: int, n_bytes: int = 1000, age_s: float = 0.0) -> Attempt:
    done = time.perf_counter_ns() - int(age_s * 1e9)
    return Attempt(i, 0, 0, 0, Response(status=200, reads=[(done, b"x" * n_bytes)], done_ns=done))


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


def test_below_the_watermark_nothing_is_parsed_until_the_run_ends():
    made = []
    digest = Digest(lambda a: a.index, lambda i, r: made.append(i), low=10 * size(attempt(0)))
    run_with(digest, [attempt(i) for i in range(10)])
    assert made == [] and digest.pending == 10 * size(attempt(0))
    digest.flush()
    assert made == list(range(10)) and digest.pending == 0


def test_above_the_watermark_the_excess_is_parsed_while_the_run_goes_on():
    made = []
    digest = Digest(lambda a: a.index, lambda i, r: made.append(i), low=3 * size(attempt(0)))
    run_with(digest, [attempt(i) for i in range(10)])
    assert made == list(range(7))  # in completion order, down to the watermark
    assert digest.pending == 3 * size(attempt(0))


def test_one_slice_per_turn_of_the_loop():
    slow = []

    def convert(a):
        time.sleep(0.002)  # a parse far longer than the slice
        return a.index

    digest = Digest(convert, lambda i, r: slow.append(i), low=0, slice_ns=1)

    async def main():
        for i in range(5):
            digest.push(attempt(i))
        task = asyncio.ensure_future(digest.run())
        seen = []
        for _ in range(2):
            await asyncio.sleep(0)  # one turn of the loop: the digest parses one, then yields
            seen.append(list(slow))
        task.cancel()
        return seen

    assert asyncio.run(main()) == [[0], [0, 1]]


def test_above_the_ceiling_push_parses_at_once():
    made = []
    digest = Digest(lambda a: a.index, lambda i, r: made.append(i), low=0, ceiling=2 * size(attempt(0)))
    for i in range(5):
        digest.push(attempt(i))  # no loop running: only the ceiling can parse
    assert made == [0, 1, 2] and digest.pending <= digest.ceiling


def test_past_max_age_a_response_is_parsed_whatever_the_watermark():
    made = []
    digest = Digest(lambda a: a.index, lambda i, r: made.append(i), low=1 << 40, max_age_ns=50_000_000)
    run_with(digest, [attempt(0, age_s=1.0), attempt(1)], turns=5)
    assert made == [0]  # the old one; the fresh one waits for its age
