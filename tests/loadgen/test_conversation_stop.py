"""Multi-turn dispatch under a cap, with a fake pool: what a stop leaves unsent."""

import asyncio
import time

from servelab.client.http import Response
from servelab.config import LoadSpec, MultiTurnSpec
from servelab.loadgen.conversations import Replay, _dispatch
from servelab.loadgen.pacer import Counters
from servelab.loadgen.values import BenchConfig
from servelab.records import Conversation, SampleRequest


class HangingPool:
    """Every request's bytes go out, then it waits for an answer; the second send sets ``stop``
    (a Ctrl-C while both slots are taken)."""

    def __init__(self, stop: asyncio.Event) -> None:
        self.sent, self.stop = 0, stop

    def build(self, method, endpoint, body, headers) -> bytes:
        return b"x"

    async def send(self, payload, on_sent=None):
        self.sent += 1
        on_sent(time.perf_counter_ns())
        if self.sent == 2:
            self.stop.set()
        await asyncio.sleep(60)
        return Response(status=200, done_ns=time.perf_counter_ns())


def test_turns_waiting_for_a_slot_at_a_stop_were_never_sent():
    """12 one-turn conversations start at t0 under a cap of 2; a stop comes while the first
    two are in flight: 2 were sent (cut), 10 waited for a slot and were never sent."""
    config = BenchConfig("http://x", "/v1/chat/completions", "openai-chat", "m", load=LoadSpec(max_concurrency=2))
    convs = [Conversation(f"c{i}", (SampleRequest(f"q{i}", 2, 4, f"r{i}"),)) for i in range(12)]
    async def main():
        stop = asyncio.Event()
        pool = HangingPool(stop)
        out = await _dispatch(pool, config, convs, MultiTurnSpec(enabled=True), [0] * 12, stop, Counters(),
                               Replay(MultiTurnSpec(enabled=True)), lambda turn: None, None)
        return out, pool

    out, pool = asyncio.run(main())
    assert out.interrupted and pool.sent == 2 and out.not_sent == 10
