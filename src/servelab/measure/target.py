"""Who a bench measures: the server's model card, the model's names, its tokenizer,
and the load generator's config. The ``/v1/models`` card is asked once per bench
(``ServerModels``): before the dataset when it must name the model (no --model), else
just before the run, so a bad dataset is said before any network; the run keeps it
(provenance, the simulated-server label) instead of asking again.
"""

from __future__ import annotations

import asyncio
import os
import time

from servelab.client import openai
from servelab.client.http import Pool
from servelab.config import BenchSpec, ServerSpec, TokenizerSpec
from servelab.datasets import notes
from servelab.datasets.tokenizer import INSTALL_QWEN3, bundled_qwen3_tokenizer_path, load_tokenizer
from servelab.errors import ServerError, TokenizerError
from servelab.loadgen.control import fetch_models, nothing_answered
from servelab.loadgen.values import BenchConfig
from servelab.loadgen.loop import loop_run
from servelab.measure import simulated


class ServerModels:
    """The server's ``/v1/models`` answer, asked the first time it is wanted and kept
    (None: not JSON, or no server: ``served`` False, the simulator's fast mode). Nothing
    answering is one line; with ``--ready-check-timeout-sec`` it is asked again each second
    until that passes, as the ready check waits for a starting server."""

    def __init__(self, spec: BenchSpec, served: bool = True) -> None:
        self.spec, self.served, self.asked, self.answer = spec, served, False, None

    def get(self) -> dict | None:
        if not self.asked and self.served:
            self.answer = loop_run(_ask(self.spec.server, self.spec.load.ready_check_timeout_s))
        self.asked = True
        return self.answer


async def _ask(server: ServerSpec, wait_s: float) -> dict | None:
    pool = Pool(server.base_url, verify_tls=server.verify_tls)
    key = os.environ.get("OPENAI_API_KEY")
    headers = {**({"Authorization": f"Bearer {key}"} if key else {}), **dict(server.headers)}
    deadline = time.monotonic() + wait_s
    try:
        while True:
            try:
                return await fetch_models(pool, headers)
            except ServerError as exc:  # no connection: nothing is listening (yet)
                if time.monotonic() >= deadline:
                    raise ServerError(nothing_answered(server.base_url) if wait_s <= 0 else
                                      f"{server.base_url} not ready after {wait_s:.0f} s: {exc}") from None
                await asyncio.sleep(1.0)
    finally:
        pool.close()


def model_names(spec: BenchSpec, models: ServerModels) -> tuple[str, str | None]:
    """(the model: tokenizer, result's model_id; the name requests carry, None: the usual).

    Without --model, as vLLM: the server's first model card; requests carry its ``id``
    (the served name), the tokenizer and ``model_id`` come from its ``root`` (the model
    path it serves). A card without ``root`` (not vLLM) uses ``id`` for both."""
    if spec.server.model:
        return spec.server.model, None
    if not models.served:
        return simulated.MODEL_NAME, None
    card = _first_card(models.get(), spec.server.base_url)
    print(f"First model name: {card['id']}, first model id: {card.get('root') or card['id']}")
    return card.get("root") or card["id"], card["id"]


def _first_card(models: dict | None, base_url: str) -> dict:
    try:
        card = models["data"][0]
        if isinstance(card.get("id"), str) and card["id"]:
            return card
    except (TypeError, KeyError, IndexError, AttributeError):
        pass
    raise ServerError(f"--model not given and {base_url}/v1/models did not name a model")


def bench_config(spec: BenchSpec, model: str, sent: str | None = None) -> BenchConfig:
    """What the load generator needs, for ``model`` (the spec's, or the server's);
    ``sent``: the name requests carry when it is not --served-model-name or ``model``."""
    server = spec.server
    kind = openai.BACKENDS[server.backend]
    return BenchConfig(
        base_url=server.base_url, endpoint=server.endpoint or openai.DEFAULT_ENDPOINTS[kind], kind=kind,
        model=sent or server.served_model_name or model, load=spec.load,
        # as in vLLM: a random dataset asks for exact output lengths
        ignore_eos=spec.request.ignore_eos or spec.dataset.name in ("random", "timed_trace"),  # as vLLM
        extra_body={**dict(spec.request.sampling), **dict(spec.request.extra_body)},
        headers=dict(server.headers), seed=spec.seed, verify_tls=server.verify_tls,
        logprobs=spec.request.logprobs, api_key=os.environ.get("OPENAI_API_KEY") or None,
        profile=server.profile, traceparent=spec.request.traceparent, tool_choice=spec.request.tool_choice)


def bench_tokenizer(spec: BenchSpec, model: str, served: bool = True):
    """--tokenizer when given (it must load); else the model's own when it is found locally;
    else the bundled Qwen3 tokenizer, with a note saying why (``served`` False: the simulator's
    fast mode, which has none). None with --skip-tokenizer-init."""
    if spec.skip_tokenizer_init:
        return None
    if spec.tokenizer:
        return load_tokenizer(TokenizerSpec(spec.tokenizer, spec.trust_remote_code))
    try:
        return load_tokenizer(TokenizerSpec(model, spec.trust_remote_code))
    except TokenizerError as exc:
        bundled = bundled_qwen3_tokenizer_path()
        if bundled is None:
            raise TokenizerError(f"{exc}; the bundled Qwen3 tokenizer it would fall back on is not installed: "
                                 f"{INSTALL_QWEN3}") from None
        notes.say(_no_tokenizer(spec, model, exc, served))  # once per process: a tune runs many benches
        return load_tokenizer(TokenizerSpec(str(bundled)))


def _no_tokenizer(spec: BenchSpec, model: str, exc: TokenizerError, served: bool) -> str:
    """Why the bundled Qwen3 tokenizer counts the prompts, in the words of what the user typed:
    why the model's own was not found only for a --model they named; a name they never typed
    (the mock's, the server's first model) gets one short line."""
    if not spec.server.model:
        what = "the simulated engine has no tokenizer of its own" if not served else \
            f"no tokenizer for model {model!r} here (the server's name for it)"
        return f"servelab: note: {what}; prompts are counted with the bundled Qwen3 tokenizer (--tokenizer for another)"
    return (f"servelab: note: no tokenizer for model {model!r} here ({exc}); using the bundled Qwen3 "
            "tokenizer (pass --tokenizer for exact prompt lengths)")
