"""``servelab bench`` flags: ``vllm bench serve``'s names, defaults and checks.

The results group (result files, reported metrics, telemetry, plots) and its parsers are
``flags/output.py``; the dataset, multi-turn, stop-rule and structured-output groups have
theirs too. This module assembles them and builds the one ``BenchSpec``.

Light on purpose (argparse only at import): ``--help`` must stay instant.
"""

from __future__ import annotations

import argparse
import dataclasses

from servelab.config import BenchSpec, DatasetSpec, LoadSpec, OutputSpec, QualitySpec, RequestSpec, ServerSpec

from servelab.spec_checks import check_agentic, check_lora, check_num_prompts, check_spec
from servelab.flags.dataset import add_dataset_arguments, dataset_spec_from_args, json_object, key_values
from servelab.flags.multi_turn import add_multi_turn_arguments, multi_turn_spec
from servelab.flags.output import add_output_arguments, parse_goodput, parse_itl_thresholds, parse_percentiles
from servelab.flags.stop import add_stop_arguments, stop_fields
from servelab.flags.structured import add_structured_arguments, structured_fields

# vLLM 0.32's --backend choices, in its order; servelab speaks the first three (client/openai.BACKENDS)
BACKEND_NAMES = ("vllm", "openai", "openai-chat", "openai-responses", "openai-audio", "openai-embeddings",
                 "openai-embeddings-chat", "openai-embeddings-clip", "openai-embeddings-vlm2vec",
                 "infinity-embeddings", "infinity-embeddings-clip", "vllm-pooling", "vllm-rerank")


# Flags servelab sets itself for each run of a study, sweep or tune (results/<name>/…):
# those commands do not offer them (hidden from --help; refused with a reason). The one
# list: --save-detailed is not in it (a run keeps the workload's choice).
RUN_OWNED_DESTS = ("label", "save_result", "append_result", "result_dir", "result_filename")
RUN_OWNED_FLAGS = tuple("--" + dest.replace("_", "-") for dest in RUN_OWNED_DESTS)  # each dest's flag


def add_bench_arguments(p: argparse.ArgumentParser, *, runs_owned: bool = False, ray_help: str | None = None) -> None:
    """Every ``servelab bench`` flag; ``runs_owned``: hide RUN_OWNED_DESTS' flags; ``ray_help``:
    what ``--ray`` means to a command that places more than bench's load with it (scale)."""
    add_dataset_arguments(p)
    _add_server(p)
    _add_load(p, ray_help)
    _add_requests(p)
    _add_sampling(p)
    _add_quality(p)
    add_structured_arguments(p)
    add_output_arguments(p, hidden=runs_owned)
    add_multi_turn_arguments(p)
    p.add_argument("--simulate", action="store_true",
                   help="no server: run the requests through servelab's simulated vLLM scheduler "
                        "(the --sim-* flags) and label every number SIMULATED")
    from servelab.sim.options import add_engine_arguments

    add_engine_arguments(p, prefix="sim-")


def hide_simulate(p: argparse.ArgumentParser) -> None:
    """A command that refuses ``--simulate`` (sweep, scale: they start an engine) does not offer
    it, nor the ``--sim-*`` flags only it reads; still parsed, so ``simulated_flag`` can refuse them."""
    for action in p._actions:
        if action.dest == "simulate" or action.dest.startswith("sim_"):
            action.help = argparse.SUPPRESS


def reword(p: argparse.ArgumentParser, dest: str, text: str) -> None:
    """A bench flag's help in the words of a command that reads it otherwise (optimize's --simulate)."""
    next(action for action in p._actions if action.dest == dest).help = text


def simulated_flag(args: argparse.Namespace) -> str | None:
    """``--simulate`` or the first ``--sim-*`` flag given, for a command that refuses them; else None."""
    from servelab.sim.options import given

    if args.simulate:
        return "--simulate"
    values = given(args)  # (dest, value): sim_max_num_seqs -> --sim-max-num-seqs
    flag = values[0][0].removeprefix("sim_").replace("_", "-").replace("no-prefix", "no-enable-prefix") if values \
        else None
    return flag and f"--sim-{flag}"


def _add_server(p: argparse.ArgumentParser) -> None:
    """Where the server is and how to reach it."""
    g = p.add_argument_group("server")
    g.add_argument("--backend", default="openai", choices=BACKEND_NAMES,
                   help="API dialect: completions (vllm, openai) or chat completions (openai-chat); vLLM's "
                        "responses, audio, embedding and pooling backends are an error (default: %(default)s)")
    g.add_argument("--base-url", default=None, help="server base URL, instead of --host/--port")
    g.add_argument("--host", default="127.0.0.1", help="server host (default: %(default)s)")
    g.add_argument("--port", type=int, default=8000, help="server port (default: %(default)s)")
    g.add_argument("--endpoint", default=None, help="API path (default: the backend's)")
    g.add_argument("--header", metavar="KEY=VALUE", nargs="*", help="extra request headers")
    g.add_argument("--model", default=None, help="model name (default: the server's first model)")
    g.add_argument("--served-model-name", default=None, help="name sent in requests (default: --model)")
    g.add_argument("--insecure", action="store_true", help="skip TLS certificate checks")
    g.add_argument("--ready-check-timeout-sec", type=int, default=0,
                   help="retry one request until the server answers, up to this long (default: %(default)s: no check)")
    g.add_argument("--profile", action="store_true",
                   help="POST the server's /start_profile before the run and /stop_profile after it "
                        "(vLLM serves them when started with --profiler-config)")


def _add_load(p: argparse.ArgumentParser, ray_help: str | None = None) -> None:
    """When requests are sent and how many at once."""
    g = p.add_argument_group("load")
    g.add_argument("--request-rate", type=float, default=float("inf"),
                   help="requests per second; inf sends every request at once (default: %(default)s)")
    g.add_argument("--burstiness", type=float, default=1.0,
                   help="gamma shape of the gaps between arrivals; 1 is Poisson (default: %(default)s)")
    g.add_argument("--max-concurrency", type=int, default=None,
                   help="requests in flight at most, across the whole run (default: no cap)")
    g.add_argument("--workers", type=int, default=1,
                   help="client processes, each on its own core, sharing one schedule (round-robin) and "
                        "one start instant; --max-concurrency is split between them, floor/ceil shares "
                        "summing to it (default: %(default)s)")
    g.add_argument("--ray", nargs="?", const="auto", default=None, metavar="ADDRESS",
                   help=ray_help or ("drive the load from every node of a Ray cluster (default address: "
                                     "auto), one shard per node, clocks aligned by an NTP-style exchange; "
                                     "needs servelab[ray]"))
    g.add_argument("--ray-connect-timeout-s", type=float, default=30.0, metavar="S",
                   help="give up on the Ray cluster if it has not answered in S seconds (default: %(default)s)")
    g.add_argument("--num-warmups", type=int, default=0, help="unmeasured requests before the run (default: %(default)s)")
    g.add_argument("--ramp-up-strategy", default=None, choices=["linear", "exponential"],
                   help="move the rate from --ramp-up-start-rps to --ramp-up-end-rps over the requests, "
                        "request i at progress i/(n-1) (not with --request-rate)")
    g.add_argument("--ramp-up-start-rps", type=int, default=None, help="the ramp's first rate (req/s)")
    g.add_argument("--ramp-up-end-rps", type=int, default=None, help="the ramp's last rate (req/s)")
    g.add_argument("--self-timed", action=argparse.BooleanOptionalAction, default=None,
                   help="send at the trace's own timestamps (timed_trace only; its default) or not")
    g.add_argument("--probe-request-rate", type=float, default=0.0,
                   help="one-token probe requests ('Hi') at about this rate beside the load, outside "
                        "--max-concurrency, their latency reported apart (default: %(default)s: none)")
    add_stop_arguments(g)


def _add_requests(p: argparse.ArgumentParser) -> None:
    """What each request asks for, beyond its prompt."""
    g = p.add_argument_group("requests")
    g.add_argument("--ignore-eos", action="store_true", help="ask the server to generate the full output length")
    g.add_argument("--extra-body", default=None, help="JSON object merged into every request body")
    g.add_argument("--logprobs", type=int, default=None,
                   help="logprobs per token (completions: sent as null when not given, as vLLM)")
    g.add_argument("--session-tools", choices=["auto", "required"], default=None, dest="tool_choice",
                   help="weka / otel / agentic with --backend openai-chat: each request carries a small read_file tool "
                        "with this tool_choice; a reply that is a tool call (or a turn the trace scripts as one) "
                        "is answered with a tool message of the stated length after the tool's wait "
                        "(docs/agentic.md; default: no tools)")
    g.add_argument("--traceparent", action="store_true",
                   help="send a W3C traceparent header with each request (ids derived from --seed and the "
                        "request id) and keep its trace id in the per-request records, to join them with the "
                        "engine's own spans (vLLM with --otlp-traces-endpoint)")
    g.add_argument("--use-beam-search", action="store_true",
                   help="accepted for vLLM's command lines; vLLM 0.32's bench serve sends nothing for it, "
                        "and neither does servelab (a note says so)")
    g.add_argument("--lora-modules", nargs="+", default=None, metavar="NAME",
                   help="LoRA adapter names served: each request's model is one of them")
    g.add_argument("--lora-assignment", default="random", metavar="RULE",
                   help="which adapter each request names, drawn with --seed (default: %(default)s). "
                        "random: each request draws one of the k adapters uniformly (vLLM's); round-robin: "
                        "request i gets adapter i mod k (vLLM's); uniform: every adapter gets the same number "
                        "of requests (within one), in a shuffled order; identical: every request names the "
                        "first adapter; distinct: request i names adapter i (needs as many adapters as "
                        "requests); zipf:ALPHA: each request draws the adapter of rank r (1 = the first "
                        "named) with probability proportional to r^-ALPHA, over the k named (0 = uniform). "
                        "The result's servelab.lora counts each adapter's requests")


def _add_quality(p: argparse.ArgumentParser) -> None:
    """Quality, judged after the run on its kept answers (quality/); servelab only."""
    q = p.add_argument_group(
        "quality (judged after the run on its kept answers; each implies --save-detailed and, "
        "unless given, --temperature 0)")
    q.add_argument("--quality-reference", nargs="+", metavar="RESULT.json",
                   help="a reference run of the same requests (then its repeats, which measure its own floor): "
                        "the share of answers identical to it, the tokens before the first divergence, and the "
                        "verdict 'same within its own variation' or 'diverges beyond it' (below the reference's "
                        "own agreement beyond chance); a sampled run is 'not comparable: sampled'")
    q.add_argument("--quality-tasks", metavar="builtin|FILE.jsonl",
                   help="send prompts with known answers and score them (Wilson 95%% interval); 'builtin': "
                        "320 seeded questions; a file: lines with prompt or messages and one of answer, regex, "
                        "json_schema, choices. With a reference: 'keeps the reference's score' (>= "
                        "--quality-ratio of it, paired by item), 'worse', or 'not distinguishable with N items'")
    q.add_argument("--quality-ratio", type=float, default=0.99, metavar="R",
                   help="the task score must be >= R x the reference's (default: MLPerf's %(default)s)")
    q.add_argument("--sampling-seed", type=int, default=None, metavar="N",
                   help="sent as every request's 'seed' (the server's sampling seed; not the dataset's --seed)")


def _quality(args: argparse.Namespace) -> QualitySpec | None:
    """--quality-*: None when the answers are not judged."""
    refs = tuple(args.quality_reference or ())
    if not refs and args.quality_tasks is None:
        return None
    if not 0 < args.quality_ratio <= 1:
        from servelab.errors import InputError

        raise InputError(f"--quality-ratio must be in (0, 1], got {args.quality_ratio}")
    return QualitySpec(references=refs, tasks=args.quality_tasks, ratio=args.quality_ratio)


def _add_sampling(p: argparse.ArgumentParser) -> None:
    """Sampling parameters, sent only when given (as vLLM)."""
    s = p.add_argument_group("sampling parameters")
    s.add_argument("--temperature", type=float, default=None, help="sent only when given")
    s.add_argument("--top-p", type=float, default=None, help="sent only when given")
    s.add_argument("--top-k", type=int, default=None, help="sent only when given")
    s.add_argument("--min-p", type=float, default=None, help="sent only when given")
    s.add_argument("--frequency-penalty", type=float, default=None, help="sent only when given")
    s.add_argument("--presence-penalty", type=float, default=None, help="sent only when given")
    s.add_argument("--repetition-penalty", type=float, default=None,
                   help="sent only when given (completions otherwise carry 1.0, as vLLM's)")


def parse_bench_argv(argv: list[str], prog: str = "servelab bench") -> argparse.Namespace:
    """Parse bench flags given as a list (a study workload, the demo). Any
    argparse complaint becomes one InputError line instead of an exit."""
    from servelab.errors import InputError

    parser = argparse.ArgumentParser(prog=prog, add_help=False, exit_on_error=False, allow_abbrev=False)
    add_bench_arguments(parser)
    try:
        args, unknown = parser.parse_known_args(argv)
    except (argparse.ArgumentError, SystemExit) as exc:
        raise InputError(f"{prog}: {exc}") from None
    if unknown:
        raise InputError(f"{prog}: unknown flag {unknown[0]!r}")
    return args


def parse_bench_spec(argv: list[str] | tuple[str, ...], prog: str = "servelab bench") -> BenchSpec:
    """Bench flags given as a list (a study workload) -> the checked spec; ``argv`` is its identity."""
    return bench_spec(parse_bench_argv(list(argv), prog=prog), tuple(argv))


def bench_spec(args: argparse.Namespace, argv: tuple[str, ...] = ()) -> BenchSpec:
    """The one place parsed bench flags become a ``BenchSpec``; every check happens here,
    once, and before any dataset work (the dataset's spec may find its file and say so)."""
    from servelab.flags.unsupported import check_backend, check_dataset, check_flags, check_skip_tokenizer

    check_flags(args)
    check_num_prompts(args.dataset_name, args.num_prompts)  # before a server is asked (it may be far or down)
    spec = BenchSpec(server=_server(args), load=_load(args), request=_request(args), output=_output(args),
                     dataset=DatasetSpec(name=args.dataset_name, path=args.dataset_path),  # as given
                     multi_turn=multi_turn_spec(args), tokenizer=args.tokenizer,
                     trust_remote_code=args.trust_remote_code, tokenizer_mode=args.tokenizer_mode,
                     skip_tokenizer_init=args.skip_tokenizer_init, simulate=_simulate(args),
                     sim_flags=_sim_flags(args), quality=_quality(args), argv=tuple(argv))
    check_backend(spec.server.backend)
    check_dataset(spec.dataset.name)
    check_skip_tokenizer(spec.dataset.name, spec.skip_tokenizer_init)
    check_spec(spec)
    spec = dataclasses.replace(spec, dataset=dataset_spec_from_args(args, draw_ids=True))
    check_agentic(spec)  # the agentic flags live in the dataset's spec, filled in just now
    check_lora(spec)
    return spec


def _simulate(args: argparse.Namespace) -> tuple | None:
    if not args.simulate:
        return None
    from servelab.sim.options import engine_from_flags

    return engine_from_flags(_sim_flags(args))


def _sim_flags(args: argparse.Namespace) -> tuple:
    from servelab.sim.options import given

    return given(args)


def _server(args: argparse.Namespace) -> ServerSpec:
    base_url = (args.base_url or f"http://{args.host}:{args.port or 8000}").rstrip("/")
    return ServerSpec(base_url=base_url, backend=args.backend, endpoint=args.endpoint, model=args.model,
                      served_model_name=args.served_model_name,
                      headers=tuple(key_values(args.header, "--header").items()), verify_tls=not args.insecure,
                      profile=args.profile)


def _load(args: argparse.Namespace) -> LoadSpec:
    return LoadSpec(request_rate=args.request_rate, burstiness=args.burstiness, max_concurrency=args.max_concurrency,
                    max_sessions=args.max_sessions,
                    workers=args.workers, ray=args.ray,
                    ray_connect_timeout_s=args.ray_connect_timeout_s, num_warmups=args.num_warmups,
                    ready_check_timeout_s=args.ready_check_timeout_sec, ramp_up_strategy=args.ramp_up_strategy,
                    ramp_up_start_rps=args.ramp_up_start_rps, ramp_up_end_rps=args.ramp_up_end_rps,
                    self_timed=args.self_timed, probe_request_rate=args.probe_request_rate,
                    **stop_fields(args))


SAMPLING_DESTS = ("temperature", "top_p", "top_k", "min_p", "frequency_penalty", "presence_penalty",
                  "repetition_penalty")


def _request(args: argparse.Namespace) -> RequestSpec:
    sampling = {k: getattr(args, k) for k in SAMPLING_DESTS}
    if _quality(args) is not None and sampling["temperature"] is None:
        sampling["temperature"] = 0.0  # judged answers are greedy unless a temperature is given
    extra = json_object(args.extra_body, "--extra-body")
    if args.sampling_seed is not None:
        extra["seed"] = args.sampling_seed  # vLLM's per-request sampling seed
    return RequestSpec(ignore_eos=args.ignore_eos,
                       sampling=tuple((k, v) for k, v in sampling.items() if v is not None),
                       extra_body=tuple(extra.items()),
                       logprobs=args.logprobs, lora_modules=tuple(args.lora_modules or ()),
                       lora_assignment=args.lora_assignment, use_beam_search=args.use_beam_search,
                       traceparent=args.traceparent, tool_choice=args.tool_choice, **structured_fields(args))


def _output(args: argparse.Namespace) -> OutputSpec:
    selected, pcts = parse_percentiles(args.percentile_metrics, args.metric_percentiles)
    return OutputSpec(
        label=args.label, save_result=args.save_result, append_result=args.append_result,
        save_detailed=args.save_detailed or _quality(args) is not None or args.structured_share > 0,
        result_dir=args.result_dir, result_filename=args.result_filename,
        metadata=tuple(key_values(args.metadata, "--metadata").items()), percentile_metrics=tuple(selected),
        metric_percentiles=tuple(pcts), goodput=tuple(parse_goodput(args.goodput).items()),
        progress=not args.disable_tqdm, telemetry=not args.no_telemetry,
        telemetry_interval_s=args.telemetry_interval, plot_timeline=args.plot_timeline,
        plot_dataset_stats=args.plot_dataset_stats, gpu_hour_cost=args.gpu_hour_cost,
        timeline_itl_thresholds_ms=parse_itl_thresholds(args.timeline_itl_thresholds),
        llmd_report=args.llm_d_report)
