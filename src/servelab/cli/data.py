"""``servelab data inspect``: the requests a dataset produces, before any server
sees them: length statistics, sample prompts, a histogram; optionally saved as
JSON and plotted. Thin: parse, call the library, print."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from servelab.config import AGENTIC_DATASETS
from servelab.errors import InputError
from servelab.flags.dataset import add_dataset_arguments, dataset_spec_from_args, tokenizer_spec_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="data_command", metavar="SUBCOMMAND", required=True)
    p = sub.add_parser("inspect", help="length statistics, sample prompts and a histogram of a dataset",
                       description="Sample a dataset as `servelab bench` would and describe the requests.")
    # Stable ids here: an inspection is read, compared and pasted, never sent.
    add_dataset_arguments(p, request_id_prefix="bench-")
    p.add_argument("--model", default=None, help="model whose tokenizer to use (found locally; see --tokenizer)")
    p.add_argument("--num-samples-to-show", type=int, default=3, help="default: %(default)s")
    p.add_argument("--save-samples", action="store_true", help="write every sampled request to a JSON file")
    p.add_argument("--samples-filename", default=None, help="default: <dataset-name>_samples.json")
    p.add_argument("--plot", metavar="PNG", default=None, help="save length histograms as a PNG (needs matplotlib)")


def run(args: argparse.Namespace) -> int:
    commands = {"inspect": run_inspect}
    return commands[args.data_command](args)


def _inspect_sessions(spec, args: argparse.Namespace) -> int:
    """Agentic sessions: their shape (sessions, blocks, waits, fan-out), then their calls' lengths."""
    from servelab.datasets import load_tokenizer
    from servelab.datasets.agentic import report
    from servelab.datasets.inspect import inspect_requests, render_report
    from servelab.datasets.sessions import sample_sessions
    from servelab.loadgen.sessions import ENGINE_BLOCK_SIZE, ideal_rate

    tokenizer = load_tokenizer(tokenizer_spec_from_args(args))
    work = sample_sessions(spec, tokenizer)
    print(report(work.about), end="")
    print(f"  ideal prefix-cache hit rate {ideal_rate(work):.1%} (an unbounded cache at block size "
          f"{ENGINE_BLOCK_SIZE}, every call in order)\n")
    print(render_report(inspect_requests(work.requests), work.requests, f"{spec.name} calls", tokenizer.name, 0),
          end="")
    return 0


def run_inspect(args: argparse.Namespace) -> int:
    from servelab.datasets import load_tokenizer, sample_requests
    from servelab.datasets.inspect import inspect_requests, render_report
    from servelab.loadgen.progress import elapsed

    from servelab.flags.unsupported import check_dataset, check_flags

    if args.plot:
        from servelab.results.plots import require_matplotlib

        require_matplotlib("--plot", " (or pip install matplotlib)")  # fail before the (possibly long) sampling
    check_flags(args)  # the same one-line refusals as bench
    spec = dataset_spec_from_args(args)
    check_dataset(spec.name)
    if spec.name in AGENTIC_DATASETS:
        return _inspect_sessions(spec, args)
    with elapsed(f"sampling {args.num_prompts} requests ({spec.name})"):
        tokenizer = load_tokenizer(tokenizer_spec_from_args(args))
        requests = sample_requests(spec, tokenizer).requests
    dataset = spec.name if spec.path is None else f"{spec.name} ({spec.path})"
    print(render_report(inspect_requests(requests), requests, dataset, tokenizer.name, args.num_samples_to_show),
          end="")
    if args.save_samples:
        path = Path(args.samples_filename or f"{spec.name}_samples.json")
        save_samples(requests, path)
        print(f"\nSaved {len(requests)} samples to {path}")
    if args.plot:
        plot_lengths(requests, Path(args.plot))
        print(f"\nSaved length histograms to {args.plot}")
    return 0


def save_samples(requests, path: Path) -> None:
    rows = [
        {"request_id": r.request_id, "prompt": r.prompt, "prompt_len": r.prompt_len,
         "expected_output_len": r.expected_output_len}
        for r in requests
    ]
    try:
        path.write_text(json.dumps(rows, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write --samples-filename {path}: {exc}") from exc


def plot_lengths(requests, path: Path) -> None:
    """Prompt and output length histograms side by side, as a PNG."""
    from servelab.results.plots import pyplot

    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.hist([r.prompt_len for r in requests], bins=30)
    left.set(title="Prompt length", xlabel="tokens", ylabel="requests")
    right.hist([r.expected_output_len for r in requests if r.expected_output_len is not None], bins=30)
    right.set(title="Output length (max_tokens)", xlabel="tokens", ylabel="requests")
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as exc:
        raise InputError(f"cannot write --plot {path}: {exc}") from exc
    finally:
        plt.close(fig)
