"""Dataset and tokenizer flags, named and defaulted as in ``vllm bench serve``.

Shared by ``servelab bench`` and ``servelab data inspect``. The caller owns
``--model``; ``tokenizer_spec_from_args`` falls back to it when present.
Top-level imports stay light: the library is imported inside the functions.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid

from servelab.config import AGENTIC_DATASETS, DATASET_NAMES, DatasetSpec, TokenizerSpec

_D = DatasetSpec()  # the one place defaults live


def add_dataset_arguments(parser: argparse.ArgumentParser, *, request_id_prefix: str | None = None) -> None:
    """``request_id_prefix``: the default prefix; None draws ``bench-<8 hex>-`` per run, as vLLM."""
    _add_common(parser.add_argument_group("dataset options"), request_id_prefix)
    _add_tokenizer(parser.add_argument_group("tokenizer options"))
    _add_sharegpt(parser.add_argument_group("sharegpt dataset options"))
    _add_random(parser.add_argument_group("random dataset options"))
    _add_prefix_repetition(parser.add_argument_group("prefix repetition dataset options"))
    _add_custom(parser.add_argument_group("custom dataset options"))
    _add_other_datasets(parser)


def _add_common(g, request_id_prefix: str | None) -> None:
    g.add_argument("--dataset-name", choices=DATASET_NAMES + AGENTIC_DATASETS, default=_D.name,
                   help="default: %(default)s; weka (a WEKA agentic trace), otel (an agent's OpenTelemetry GenAI "
                        "spans, OTLP JSON) and agentic (synthetic agentic sessions) are servelab's: sessions "
                        "replayed as DAGs of calls, sub-agents and tool waits")
    g.add_argument("--dataset-path", default=None,
                   help="dataset file (sharegpt: JSON list, default the bundled copy if installed; custom, "
                        "timed_trace, spec_bench: JSONL; burstgpt: CSV; speed_bench: its folder; hf: a local copy of "
                        "a hub dataset, folder or data file)")
    g.add_argument("--num-prompts", type=int, default=_D.num_prompts, help="default: %(default)s")
    g.add_argument("--seed", type=int, default=_D.seed, help="seed of every random draw (default: %(default)s)")
    g.add_argument("--request-id-prefix", default=request_id_prefix,
                   help="default: %(default)s" if request_id_prefix else "default: bench-<8 random hex>- (as vLLM)")
    g.add_argument("--no-oversample", action="store_true", help="do not top up a short dataset by resampling")
    g.add_argument("--disable-shuffle", action="store_true", help="keep the dataset's order")
    g.add_argument("--input-len", type=int, default=None,
                   help="general input length: sets --random-input-len, as vLLM (default: the dataset's)")
    g.add_argument("--output-len", type=int, default=None,
                   help="general output length: sets --random-, --sharegpt-, --custom-, --hf-, --spec-bench- "
                        "and --prefix-repetition-output-len, as vLLM (default: each dataset's)")


def _add_tokenizer(g) -> None:
    g.add_argument("--tokenizer", default=None,
                   help="local folder, tokenizer.json, or hub id in the local HF cache "
                        "(default: --model, else the bundled Qwen3 tokenizer)")
    g.add_argument("--trust-remote-code", action="store_true", help="allow a tokenizer's own code (transformers)")
    g.add_argument("--tokenizer-mode", default="auto",
                   help="auto or hf: a Hugging Face tokenizer (servelab has no mistral_common or deepseek_v32 "
                        "tokenizers; those modes stop with an error) (default: %(default)s)")
    g.add_argument("--skip-tokenizer-init", action="store_true",
                   help="load no tokenizer: output tokens from the server's usage only; datasets that build "
                        "prompts from token ids cannot run")


def _add_sharegpt(g) -> None:
    g.add_argument("--sharegpt-output-len", type=int, default=None,
                   help="fix every output length (default: the reference reply's length)")
    g.add_argument("--sharegpt-min-len", type=int, default=_D.sharegpt_min_len,
                   help="drop prompts or replies shorter than this many tokens (default: %(default)s)")
    g.add_argument("--sharegpt-max-prompt-len", type=int, default=_D.sharegpt_max_prompt_len,
                   help="drop prompts longer than this (default: %(default)s)")
    g.add_argument("--sharegpt-max-total-len", type=int, default=_D.sharegpt_max_total_len,
                   help="drop pairs whose prompt + output exceed this (default: %(default)s)")


def _add_random(g) -> None:
    g.add_argument("--random-input-len", type=int, default=_D.random_input_len, help="default: %(default)s")
    g.add_argument("--random-output-len", type=int, default=_D.random_output_len, help="default: %(default)s")
    g.add_argument("--random-range-ratio", type=parse_range_ratio, default="0.0",
                   help='lengths uniform in [L(1-r), L(1+r)]; a float, or {"input": r1, "output": r2} '
                        "(default: %(default)s)")
    g.add_argument("--random-prefix-len", type=int, default=_D.random_prefix_len,
                   help="tokens of one random prefix shared by every prompt (default: %(default)s)")


def _add_prefix_repetition(g) -> None:
    g.add_argument("--prefix-repetition-prefix-len", type=int, default=_D.prefix_repetition_prefix_len,
                   help="default: %(default)s")
    g.add_argument("--prefix-repetition-suffix-len", type=int, default=_D.prefix_repetition_suffix_len,
                   help="default: %(default)s")
    g.add_argument("--prefix-repetition-num-prefixes", type=int, default=_D.prefix_repetition_num_prefixes,
                   help="prompts per prefix = num-prompts // this (default: %(default)s)")
    g.add_argument("--prefix-repetition-output-len", type=int, default=_D.prefix_repetition_output_len,
                   help="default: %(default)s")


def _add_custom(g) -> None:
    g.add_argument("--custom-output-len", type=int, default=_D.custom_output_len,
                   help="output length of every request; -1 reads each line's output_tokens (default: %(default)s)")
    g.add_argument("--skip-chat-template", action="store_true",
                   help="send custom prompts as written, not wrapped in the tokenizer's chat template")
    g.add_argument("--chat-template-kwargs", default=None, metavar="JSON",
                   help='JSON object passed to the chat template where prompts are rendered client-side '
                        '(custom), e.g. \'{"enable_thinking": false}\'')
    g.add_argument("--custom-ensure-client-side-data", action="store_true",
                   help="custom_image only (send images as base64); servelab sends no images: an error")


def _add_other_datasets(parser) -> None:
    """Flags of vLLM's other datasets. Each is parsed with vLLM's default; a dataset
    servelab does not sample yet stops at run time with a one-line reason."""
    g = parser.add_argument_group("hf dataset options")
    g.add_argument("--hf-name", default=None,
                   help="hf: the hub id --dataset-path is a copy of (picks vLLM's recipe; never downloaded)")
    g.add_argument("--hf-split", default=None, help="split of the hf dataset")
    g.add_argument("--hf-subset", default=None, help="subset of the hf dataset")
    g.add_argument("--hf-output-len", type=int, default=None, help="fix every output length of the hf dataset")
    g.add_argument("--no-stream", action="store_true",
                   help="hf: load the dataset whole, not streamed (its shuffle then permutes every row)")
    g = parser.add_argument_group("spec bench / speed bench dataset options")
    g.add_argument("--spec-bench-category", default=None, help="spec_bench category (default: all)")
    g.add_argument("--spec-bench-output-len", type=int, default=_D.spec_bench_output_len, help="default: %(default)s")
    g.add_argument("--speed-bench-category", default=None, help="speed_bench category (default: all)")
    g.add_argument("--speed-bench-dataset-subset", default=_D.speed_bench_dataset_subset,
                   choices=["throughput_1k", "throughput_16k", "throughput_32k", "qualitative", "throughput_2k",
                            "throughput_8k"], help="default: %(default)s")
    g.add_argument("--speed-bench-output-len", type=int, default=_D.speed_bench_output_len, help="default: %(default)s")
    g = parser.add_argument_group("timed-trace dataset options")
    g.add_argument("--timed-trace-chunk-hash-size", type=int, default=_D.timed_trace_chunk_hash_size,
                   help="tokens each hash id stands for (default: %(default)s)")
    for name, default in (("hash-ids", "hash_ids"), ("input-length", "input_length"),
                          ("output-length", "output_length"), ("timestamp", "timestamp")):
        g.add_argument(f"--timed-trace-label-{name}", default=default,
                       help=f"the trace's JSON key for the {name.replace('-', ' ')} (default: %(default)s)")
    g.add_argument("--timed-trace-sec-multiplier", type=float, default=_D.timed_trace_sec_multiplier,
                   help="timestamps times this are seconds, e.g. 0.001 for ms (default: %(default)s)")
    _add_agentic(g)
    _add_multimodal(parser)
    g = parser.add_argument_group("other vLLM dataset options")
    g.add_argument("--blazedit-min-distance", type=float, default=0.0, help="hf blazedit (default: %(default)s)")
    g.add_argument("--blazedit-max-distance", type=float, default=1.0, help="hf blazedit (default: %(default)s)")
    g.add_argument("--bfcl-categories", default=None, help="hf BFCL categories, comma-separated")
    g.add_argument("--no-reranker", action="store_true", help="random-rerank: the model does not rerank natively")
    g.add_argument("--random-batch-size", type=int, default=1,
                   help="prompts per request, for embeddings benchmarks only (servelab measures generation: "
                        "values above 1 are an error) (default: %(default)s)")


def _add_agentic(g) -> None:
    """Agentic sessions' flags (weka, otel, agentic), listed in the timed-trace group as before."""
    g.add_argument("--trace-scale", type=float, default=_D.trace_scale,
                   help="weka / otel / agentic: every length times this (block size, contexts, outputs), the blocks' "
                        "sharing kept, to fit long agent contexts to a small engine; the result says so "
                        "(default: %(default)s)")
    g.add_argument("--trace-max-wait", type=float, default=None, metavar="SECONDS", dest="trace_max_wait_s",
                   help="weka / otel / agentic: cap each call's tool or think wait (AgentX caps idle gaps at 10 s); "
                        "the result says so (default: as stated)")
    g.add_argument("--agentic-shape", metavar="KEY=VALUE", nargs="*", default=None,
                   help="agentic: the synthetic sessions' distributions over their defaults (docs/agentic.md), "
                        "e.g. turns=2:5 fan_out_p=0.5 tool_wait_s=2 output_tokens=64")
    g.add_argument("--max-sessions", type=int, default=None, metavar="N",
                   help="weka / otel / agentic: at most N sessions under way at once — lanes, as AgentX's "
                        "--concurrency: a session holds one from its start until its last call (sub-agents "
                        "included) ends, and the next session starts when a lane frees; --max-concurrency still "
                        "caps calls in flight. Under --agentic-locked only the first N sessions start at a sampled "
                        "point, and lanes recycle as AgentX's: a lane whose session has drained takes the next — "
                        "the trace's other sessions, then the trace again — each whole from its first call, "
                        "until --agentic-min-duration has passed (default: every session at its start)")
    g.add_argument("--agentic-locked", action="store_true",
                   help="weka / otel: the AgentX-style locked scenario (docs/agentic.md): delays from the previous "
                        "completion, idle gaps capped at 10 s, a cache-bust marker per session, start points "
                        "sampled with the turn before sent as warm-up, and a validity verdict in the result; "
                        "refuses the flags that would change it")
    g.add_argument("--agentic-min-duration", type=float, default=_D.agentic_min_duration_s, metavar="SECONDS",
                   dest="agentic_min_duration_s",
                   help="--agentic-locked: a run shorter than this is invalid; with --max-sessions, lanes take "
                        "sessions until it has passed (default: %(default)s, AgentX's floor)")


def _add_multimodal(parser) -> None:
    """Accepted so vLLM's command lines parse; servelab serves no vision or audio model,
    so any of these set away from vLLM's default is an error (flags/bench_serve.py)."""
    g = parser.add_argument_group("multimodal dataset options (not supported: an error when set)")
    g.add_argument("--enable-multimodal-chat", action="store_true", help="multimodal chat transformation")
    g.add_argument("--random-mm-base-items-per-request", type=int, default=1, help="random-mm items per request")
    g.add_argument("--random-mm-num-mm-items-range-ratio", type=float, default=0.0, help="random-mm item spread")
    g.add_argument("--random-mm-limit-mm-per-prompt", default={"image": 255, "video": 1},
                   help="random-mm per-modality caps (JSON)")
    g.add_argument("--random-mm-bucket-config", default={(256, 256, 1): 0.5, (720, 1280, 1): 0.5,
                                                         (720, 1280, 16): 0.0},
                   help="random-mm item sizes and their probabilities")
    g.add_argument("--asr-min-audio-len-sec", type=float, default=0.0, help="ASR dataset minimum audio length")
    g.add_argument("--asr-max-audio-len-sec", type=float, default=float("inf"),
                   help="ASR dataset maximum audio length")


def parse_range_ratio(text: str) -> tuple[float, float | None]:
    """``--random-range-ratio``: ``"0.3"`` -> (0.3, None); ``'{"input": 0.3, "output": 0.5}'`` -> (0.3, 0.5)."""
    try:
        value = json.loads(text)
        pair = (value["input"], value["output"]) if isinstance(value, dict) else (value, None)
        ratios = tuple(None if r is None else float(r) for r in pair)
    except (ValueError, KeyError, TypeError):
        raise argparse.ArgumentTypeError(f'expected a number or {{"input": r, "output": r}}, got {text!r}') from None
    if any(r is not None and not 0.0 <= r < 1.0 for r in ratios):
        raise argparse.ArgumentTypeError(f"each ratio must be in [0, 1), got {text!r}")
    return ratios  # type: ignore[return-value]


def dataset_spec_from_args(args: argparse.Namespace, draw_ids: bool = False) -> DatasetSpec:
    """``draw_ids``: without --request-id-prefix, leave the prefix to be drawn per sample
    (a bench spec serves many runs); else draw it now."""
    input_ratio, output_ratio = args.random_range_ratio
    args = general_lengths(args)
    prefix = args.request_id_prefix
    if prefix is None and not draw_ids:
        prefix = f"bench-{uuid.uuid4().hex[:8]}-"
    return DatasetSpec(
        name=args.dataset_name, path=_dataset_path(args), num_prompts=args.num_prompts, seed=args.seed,
        request_id_prefix=prefix,
        shuffle=not args.disable_shuffle, oversample=not args.no_oversample,
        sharegpt_output_len=args.sharegpt_output_len, sharegpt_min_len=args.sharegpt_min_len,
        sharegpt_max_prompt_len=args.sharegpt_max_prompt_len, sharegpt_max_total_len=args.sharegpt_max_total_len,
        random_input_len=args.random_input_len, random_output_len=args.random_output_len,
        random_range_ratio=input_ratio, random_output_range_ratio=output_ratio,
        random_prefix_len=args.random_prefix_len,
        prefix_repetition_prefix_len=args.prefix_repetition_prefix_len,
        prefix_repetition_suffix_len=args.prefix_repetition_suffix_len,
        prefix_repetition_num_prefixes=args.prefix_repetition_num_prefixes,
        prefix_repetition_output_len=args.prefix_repetition_output_len,
        custom_output_len=args.custom_output_len, skip_chat_template=args.skip_chat_template,
        chat_template_kwargs=tuple(json_object(args.chat_template_kwargs, "--chat-template-kwargs").items()),
        spec_bench_output_len=args.spec_bench_output_len, spec_bench_category=args.spec_bench_category,
        speed_bench_output_len=args.speed_bench_output_len, speed_bench_category=args.speed_bench_category,
        speed_bench_dataset_subset=args.speed_bench_dataset_subset,
        hf_name=args.hf_name, hf_split=args.hf_split, hf_subset=args.hf_subset, hf_output_len=args.hf_output_len,
        hf_stream=not args.no_stream, blazedit_min_distance=args.blazedit_min_distance,
        blazedit_max_distance=args.blazedit_max_distance,
        **{name: getattr(args, name) for name in _TIMED_TRACE_FIELDS}, trace_scale=args.trace_scale,
        trace_max_wait_s=args.trace_max_wait_s,
        agentic_shape=tuple(key_values(args.agentic_shape, "--agentic-shape").items()),
        agentic_locked=args.agentic_locked, agentic_min_duration_s=args.agentic_min_duration_s,
    )


_TIMED_TRACE_FIELDS = ("timed_trace_chunk_hash_size", "timed_trace_sec_multiplier", "timed_trace_label_timestamp",
                       "timed_trace_label_input_length", "timed_trace_label_output_length",
                       "timed_trace_label_hash_ids")


# --output-len sets these, as vLLM's serve does
OUTPUT_LEN_DESTS = ("random_output_len", "sharegpt_output_len", "custom_output_len", "hf_output_len",
                    "spec_bench_output_len", "prefix_repetition_output_len")


def general_lengths(args: argparse.Namespace) -> argparse.Namespace:
    """``--input-len``/``--output-len`` written onto the dataset flags they stand for (a copy)."""
    changes = {}
    if getattr(args, "input_len", None) is not None:
        changes["random_input_len"] = args.input_len
    if getattr(args, "output_len", None) is not None:
        changes.update({dest: args.output_len for dest in OUTPUT_LEN_DESTS})
    return argparse.Namespace(**{**vars(args), **changes})


def key_values(items: list[str] | None, flag: str, *, strip: bool = True) -> dict[str, str]:
    """``KEY=VALUE`` items (``--header``, ``--metadata``, an engine's ``--env``) as a dict, the
    last of a repeated key winning; ``strip``: drop the blanks around each key and value (an
    environment value is kept as given)."""
    from servelab.errors import InputError

    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"{flag} {item!r}: expected KEY=VALUE")
        out[key.strip() if strip else key] = value.strip() if strip else value
    return out


def json_object(text: str | None, flag: str) -> dict:
    """A flag holding a JSON object, or nothing; anything else is a one-line error."""
    from servelab.errors import InputError

    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{flag}: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise InputError(f"{flag}: must be a JSON object")
    return value


def _dataset_path(args: argparse.Namespace) -> str | None:
    if args.dataset_path is not None or args.dataset_name != "sharegpt":
        return args.dataset_path
    from servelab.datasets.tokenizer import bundled_sharegpt_path

    bundled = bundled_sharegpt_path()
    if bundled is not None:
        print(f"servelab: note: no --dataset-path; using the bundled ShareGPT copy {bundled}", file=sys.stderr)
    return None if bundled is None else str(bundled)


def tokenizer_spec_from_args(args: argparse.Namespace) -> TokenizerSpec:
    """``--tokenizer``, else ``--model``, else the bundled Qwen3 tokenizer."""
    name = args.tokenizer or getattr(args, "model", None)
    if name is None:
        from servelab.datasets.tokenizer import INSTALL_QWEN3, bundled_qwen3_tokenizer_path
        from servelab.errors import TokenizerError

        bundled = bundled_qwen3_tokenizer_path()
        if bundled is None:
            raise TokenizerError("no --tokenizer or --model given and the bundled Qwen3 tokenizer is not "
                                 f"installed: {INSTALL_QWEN3}")
        print(f"servelab: note: no --tokenizer or --model; using the bundled Qwen3 tokenizer {bundled}",
              file=sys.stderr)
        name = str(bundled)
    return TokenizerSpec(name_or_path=name, trust_remote_code=args.trust_remote_code)
