"""``python -m servelab.engines.sim_main --port N [vLLM-named flags]``: the ``sim`` engine.

An OpenAI-compatible server whose tokens come on the timing of the simulated vLLM V1
scheduler (``servelab.sim``), in real time: the mock's HTTP/SSE layer (``mock/``) does
the serving, and instead of the mock's fixed schedule an engine loop runs steps — each
step is scheduled, its simulated duration waited out on the mock's alarm, then every
request that computed its last missing token gets one streamed token. It prints vLLM's
startup memory lines and serves vLLM's ``/metrics`` names, so servelab's memory report,
telemetry and diagnosis read it as a vLLM; it says SIMULATED at startup and in its
``/v1/models`` owner.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Callable
from functools import partial

from servelab.datasets.tokenizer import load_tokenizer
from servelab.config import TokenizerSpec
from servelab.mock.config import MockConfig
from servelab.mock import http
from servelab.mock.dialect import DONE, LAST_CHUNK, chunk, error_body, models_body
from servelab.mock.server import MockServer, new_event_loop
from servelab.sim.model import DEFAULT_OUTPUT_LEN, EngineLimits, SimRequest, StepModel
from servelab.sim.options import add_engine_arguments, from_args
from servelab.sim.prompt import estimate_tokens, pseudo_token_ids
from servelab.sim.scheduler import Scheduler, Seq, Step

BANNER = "SIMULATED engine (servelab.sim): no model runs; token timing from a vLLM V1 scheduler model"


class SimServer(MockServer):
    def __init__(self, config: MockConfig, limits: EngineLimits, model: StepModel, tokenizer=None) -> None:
        super().__init__(config)
        self.engine = Scheduler(limits, model)
        self.tokenizer = tokenizer
        self.gens: dict[int, object] = {}  # seq index -> its Generation
        self.seq_of: dict[int, Seq] = {}  # id(generation) -> its Seq
        self.stepping = False
        self._prompt = ""
        self._token_ids: tuple[int, ...] | None = None  # a completions prompt sent as token ids
        self._n = 0

    def _generate(self, conn, req, now: int, chat: bool) -> None:
        self._prompt = prompt_text(req.body, chat)  # the mock's parser keeps only a length
        self._token_ids = None if chat else prompt_ids(req.body)
        super()._generate(conn, req, now, chat)

    def _queue_or_admit(self, gen, now: int) -> None:
        text, ids = self._prompt, self._token_ids
        if ids is not None:  # token ids (a trace's blocks): the prefix cache sees exactly them
            n_prompt = len(ids)
        else:
            n_prompt = len(self.tokenizer.encode(text)) if self.tokenizer else estimate_tokens(text)
            ids = pseudo_token_ids(text, n_prompt)
        gen.log.prompt_tokens = n_prompt
        req = SimRequest(now, n_prompt, gen.plan.n_tokens, ids)
        delay = self.engine.model.request_ns  # the API server's share, as the fast mode holds it back
        if delay > 0:
            self.scheduler.add(now + delay, Call(now + delay, partial(self._to_engine, gen, req)))
        else:
            self._to_engine(gen, req, now)

    def _to_engine(self, gen, req: SimRequest, now: int) -> None:
        if gen.log.finish is not None or gen.conn.closed:
            return  # the client left while the API server held it
        if not self.engine.fits(req):
            self._reject(gen, now, req.prompt_len)
            return
        seq = Seq(self._n, req, self.engine.limits.block_size, self.engine.limits.enable_prefix_caching)
        self._n += 1
        self.gens[seq.index], self.seq_of[id(gen)] = gen, seq
        gen.log.admit_ns = now
        self.engine.add(seq)
        if not self.stepping:
            self._begin(now)

    def _reject(self, gen, now: int, n_prompt: int) -> None:
        """A request larger than the whole KV cache could never run: an error, as vLLM
        answers a prompt over its length (in the stream when its head is already out)."""
        text = (f"prompt ({n_prompt} tokens) + max_tokens ({gen.plan.n_tokens}) exceed the simulated "
                f"KV cache ({self.engine.limits.kv_tokens} tokens)")
        body = error_body(text, 400, "BadRequestError")
        if gen.log.stream:
            gen.conn.transport.write(chunk(b"data: " + body + b"\n\n") + chunk(DONE) + LAST_CHUNK)
        else:
            gen.conn.transport.write(http.response(400, body, "application/json", gen.keep_alive))
        self.release(gen, now, "too-long")
        gen.conn.done(gen.keep_alive)

    def _begin(self, now: int) -> None:
        step = self.engine.begin(now)
        self.stepping = step is not None
        if step is not None:
            self.scheduler.add(step.end_ns, Call(step.end_ns, partial(self.step_done, step)))

    def step_done(self, step: Step, _due_ns: int) -> None:
        """At a step's end: apply it, stream each token it produced, start the next step
        at the simulated end time (not "now": a late tick must not slow the engine)."""
        self.engine.end(step)
        for seq, _ in step.work:
            if not seq.aborted and seq.token_ns and seq.token_ns[-1] == step.end_ns:
                self._emit(self.gens[seq.index], seq)
        self._begin(step.end_ns)

    def _emit(self, gen, seq: Seq) -> None:
        if gen.log.finish is not None or gen.conn.closed:
            return
        last = seq.generated >= seq.output_len
        if not gen.log.stream:
            if last:
                gen._write_full()
                gen._end()
            return
        if last:
            gen._write(gen.n_events)
            gen._end()
        elif gen.role_pending:  # chat: vLLM's role-only delta goes just before the first token
            gen._write(gen.sent + 1)
        else:
            gen._write_one()

    def release(self, gen, t_ns: int, finish: str) -> None:
        self.truth_log.end(gen.log, t_ns, finish)
        seq = self.seq_of.pop(id(gen), None)
        if seq is not None:
            self.engine.abort(seq)  # a no-op for a request that finished
            self.gens.pop(seq.index, None)

    def route(self, conn, req, now: int) -> None:
        # The mock's route table holds its own handlers; these two say what we are.
        own = {("GET", "/metrics"): self._sim_metrics, ("GET", "/v1/models"): self._sim_models,
               ("POST", "/reset_prefix_cache"): self._reset_prefix_cache}.get((req.method, req.path))
        if own is not None:
            own(conn, req)
        else:
            super().route(conn, req, now)

    def _sim_metrics(self, conn, req) -> None:
        conn.reply(200, metrics_text(self), req.keep_alive, "text/plain; version=0.0.4; charset=utf-8")

    def _reset_prefix_cache(self, conn, req) -> None:
        self.engine.pool.reset()
        conn.reply(200, b"", req.keep_alive)

    def _sim_models(self, conn, req) -> None:
        body = models_body(self.config.model, self.config.max_model_len, self._created)
        conn.reply(200, body.replace(b'"servelab-mock"', b'"servelab-sim (SIMULATED)"'), req.keep_alive)


class Call:
    """A job on the mock's alarm: ``what(due_ns)`` at its due time (a step ends, the API server
    hands a request to the engine). It is given the due time, not the tick's "now": a late tick
    must not slow the simulated engine."""

    __slots__ = ("due_ns", "what")

    def __init__(self, due_ns: int, what: Callable[[int], None]) -> None:
        self.due_ns, self.what = due_ns, what

    def fire(self, now_ns: int) -> None:
        self.what(self.due_ns)
        return None


def prompt_text(body: bytes, chat: bool) -> str:
    """The prompt as text (chat: the messages' contents joined); "" if unreadable."""
    try:
        data = json.loads(body)
        if chat:
            return "\n".join(str(m.get("content", "")) for m in data.get("messages") or [])
        prompt = data.get("prompt", "")
        return prompt if isinstance(prompt, str) else json.dumps(prompt)
    except (ValueError, AttributeError, TypeError):
        return ""


def prompt_ids(body: bytes) -> tuple[int, ...] | None:
    """A completions prompt sent as one list of token ids, else None."""
    try:
        prompt = json.loads(body).get("prompt")
    except (ValueError, AttributeError):
        return None
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        return tuple(prompt)
    return None


def metrics_text(server: SimServer) -> bytes:
    """vLLM's exposed names (as telemetry/names.py reads them), from the engine's state."""
    e = server.engine
    c, limits, model = e.counters, e.limits, server.config.model
    labels = f'engine="0",model_name="{model}"'
    rows = [
        ("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", len(e.running)),
        ("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", len(e.waiting)),
        ("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", e.pool.usage),
        ("vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.", c.preemptions),
        ("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", c.prompt_tokens),
        ("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", c.generation_tokens),
        ("vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in tokens.", c.prefix_queries),
        ("vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in tokens.", c.prefix_hits),
        ("vllm:iteration_tokens_total_sum", "counter", "Tokens per engine step (sum).", c.step_tokens),
        ("vllm:iteration_tokens_total_count", "counter", "Engine steps.", c.steps),
    ]
    lines = []
    for name, kind, text, value in rows:
        lines += [f"# HELP {name} {text} (SIMULATED)", f"# TYPE {name} {kind}", f"{name}{{{labels}}} {float(value)}"]
    info = (f'block_size="{limits.block_size}",num_gpu_blocks="{limits.num_blocks}",'
            f'enable_prefix_caching="{limits.enable_prefix_caching}",cache_dtype="auto"')
    lines += ["# TYPE vllm:cache_config_info gauge", f"vllm:cache_config_info{{{info}}} 1.0"]
    for reason, n in sorted(server.success.items()):
        lines.append(f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} {float(n)}')
    return ("\n".join(lines) + "\n").encode()


def memory_lines(limits: EngineLimits, max_model_len: int) -> list[str]:
    """vLLM's startup lines, as engines/memory.py parses them."""
    return [f"GPU KV cache size: {limits.kv_tokens:,} tokens",
            f"Maximum concurrency for {max_model_len:,} tokens per request: {limits.kv_tokens / max_model_len:.2f}x"]


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="servelab.engines.sim_main", allow_abbrev=False)
    p.add_argument("--model", default="sim", help="the served model name")
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-model-len", type=int, default=2048)
    p.add_argument("--tokenizer", default=None,
                   help="count prompt tokens with it (default: about 4 characters a token)")
    add_engine_arguments(p)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    limits, model = from_args(args)
    tokenizer = load_tokenizer(TokenizerSpec(args.tokenizer)) if args.tokenizer else None
    config = MockConfig(model=args.served_model_name or args.model, max_model_len=args.max_model_len,
                        host=args.host, port=args.port, default_max_tokens=DEFAULT_OUTPUT_LEN)
    print(BANNER, flush=True)
    print(f"step model: {model.source}", flush=True)  # the numbers' provenance, in the engine's own log
    for line in memory_lines(limits, args.max_model_len):
        print(line, flush=True)
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(_serve(SimServer(config, limits, model, tokenizer)))
    finally:
        loop.close()
    return 0


async def _serve(server: SimServer) -> None:
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"servelab sim: listening on {server.url}", flush=True)
    await stop.wait()
    await server.stop()


if __name__ == "__main__":
    sys.exit(main())
