"""``servelab mock``: a mock OpenAI-compatible server that records what it sent, when."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--model", default="mock", help="model name served and echoed")
    parser.add_argument("--ttft-ms", type=float, default=0.0, help="request parsed → first content event")
    parser.add_argument("--itl-ms", type=float, default=0.0, help="gap between content events")
    parser.add_argument("--output-len", type=_output_len, default=None, metavar="N|LO:HI",
                        help="output tokens per request, overriding max_tokens (LO:HI draws uniformly)")
    parser.add_argument("--tokens-per-event", type=int, default=1)
    parser.add_argument("--eos-len", type=int, default=None,
                        help="stop at this many tokens (finish_reason stop) unless the request sets ignore_eos")
    parser.add_argument("--error-rate", type=float, default=0.0, help="fraction of requests that fail")
    parser.add_argument("--failure-kinds", default="http500",
                        help="comma list of http500, abort (close mid-stream), stall (stop mid-stream)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the failure and length draws")
    parser.add_argument("--max-open", "--max-num-seqs", dest="max_open", type=int, default=None,
                        help="at most this many requests run; the rest wait (num_requests_waiting); "
                             "--max-num-seqs is vLLM's name for it, so an optimizer can turn it")
    parser.add_argument("--close-after-response", action="store_true",
                        help="close the connection after each streamed response, as llama.cpp does")
    parser.add_argument("--reasoning-len", type=int, default=0, metavar="N",
                        help="act as a reasoning model: the first N tokens of each streamed chat reply are "
                             "'reasoning' deltas, the rest 'content' (default: %(default)s)")
    parser.add_argument("--record-messages", action="store_true",
                        help="keep each chat request's messages in the truth (what a multi-turn client sent)")
    parser.add_argument("--root", default=None,
                        help="the model card's root in /v1/models, as vLLM shows the served path (default: --model)")
    parser.add_argument("--tool-calls", default="user", choices=["user", "always", "never"],
                        help="a chat request carrying tools is answered with a tool call (streamed as vLLM "
                             "streams tool_calls deltas): user: when its last message is the user's (default); "
                             "tool_choice required always gets one, none never")
    parser.add_argument("--keep-requests", action="store_true",
                        help="record every request received (method, path, headers, body) in the truth")
    q = parser.add_argument_group("answers (quality tests: what the mock says)")
    q.add_argument("--answers", default="cycle", choices=["cycle", "prompt"],
                   help="cycle: the same words for every request (default); prompt: each prompt its own "
                        "answer, the same on every run (greedy)")
    q.add_argument("--corrupt-rate", type=float, default=0.0, metavar="SHARE",
                   help="with --answers prompt: this share of prompts get a corrupted answer (a lossy stand-in)")
    q.add_argument("--corrupt-seed", type=int, default=0, help="which prompts are corrupted, and where")
    q.add_argument("--ignore-temperature", action="store_true",
                   help="answer greedily even when a request asks temperature > 0 (a server that ignores it)")
    q.add_argument("--answer-key", default=None, metavar="FILE.json",
                   help="a JSON object {prompt: reply}: prompts it holds (or that contain one) get that reply")
    parser.add_argument("--ignore-constraints", action="store_true",
                        help="answer as if a request carried no structured-output constraint (a server that "
                             "ignores structured_outputs and response_format); without it the mock answers a JSON "
                             "schema (either field), regex or choice with a valid text, cut at max_tokens")
    parser.add_argument("--truth-file", default=None, help="write the recorded truth here (JSON) on exit")


def _output_len(text: str) -> int | tuple[int, int]:
    lo, sep, hi = text.partition(":")
    try:
        return (int(lo), int(hi)) if sep else int(lo)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or LO:HI, got {text!r}") from None


def config_from_args(args: argparse.Namespace):
    from servelab.mock.config import MockConfig

    kinds = tuple(k.strip() for k in args.failure_kinds.split(",") if k.strip())
    return MockConfig(
        ttft_ms=args.ttft_ms, itl_ms=args.itl_ms, output_len=args.output_len,
        tokens_per_event=args.tokens_per_event, eos_len=args.eos_len, error_rate=args.error_rate,
        failure_kinds=kinds, seed=args.seed, model=args.model, host=args.host, port=args.port,
        close_after_response=args.close_after_response, max_open=args.max_open, root=args.root,
        keep_requests=args.keep_requests, reasoning_len=args.reasoning_len, record_messages=args.record_messages,
        answers=args.answers, corrupt_rate=args.corrupt_rate, corrupt_seed=args.corrupt_seed,
        ignore_temperature=args.ignore_temperature, answer_key=args.answer_key,
        ignore_constraints=args.ignore_constraints, tool_calls=args.tool_calls,
    )


def run(args: argparse.Namespace) -> int:
    from servelab.mock.launch import serve_until_signal

    return serve_until_signal(config_from_args(args), args.truth_file)
