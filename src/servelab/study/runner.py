"""Run a study: each engine starts once, warms up, runs its workloads ``repeats``
times under identical load, stops; then the next engine. Resumable.

Identical load: every repeat of a workload sends the same requests (same flags,
same seed, so the same sample), at the same rate and concurrency; the engine's
prefix cache is emptied before each run where the engine allows it (vLLM:
``POST /reset_prefix_cache``, served when ``VLLM_SERVER_DEV_MODE=1``, which the
study sets), so a repeat is not served from the cache its predecessor filled.

No engine outlives the study: each is used inside ``with start_engine(...)``;
SIGINT/SIGTERM during a run end that run (``execute`` handles them), and the
study then raises KeyboardInterrupt so the engine stops on the way out.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import shutil
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from servelab.engines import EngineSpec, embedded_engine_spec, start_engine
from servelab.errors import EngineError
from servelab.flags.bench import parse_bench_argv
from servelab.study import layout
from servelab.study.bench import BenchOutcome, execute
from servelab.study.facts import engine_context, engine_facts, footprint_gib, hardware
from servelab.study.spec import EngineEntry, RunKey, Study

RESET_TRIES = 10  # vLLM refuses a reset while blocks are held; they free within moments
PROMPT_SAMPLES = 3  # prompts kept per workload for the report


@dataclass(slots=True)
class StudyOutcome:
    total: int
    done: int  # complete now, including those kept from before
    ran: int  # completed by this invocation
    failed: list[str] = field(default_factory=list)
    folder: Path | None = None

    @property
    def exit_code(self) -> int:
        return 0 if self.done == self.total else 1


class Display:
    """The study's own lines ("[study demo] engine 2/3 baseline · …"), on stdout."""

    def __init__(self, study: Study, stream=None) -> None:
        self.study, self.stream = study, stream or sys.stdout

    def say(self, text: str) -> None:
        print(f"[study {self.study.name}] {text}", file=self.stream, flush=True)

    def where(self, key: RunKey, done: int, total: int) -> str:
        engines = self.study.engine_order()
        return (f"engine {engines.index(key.engine) + 1}/{len(engines)} {key.engine} · workload {key.workload}"
                f" · repeat {key.repeat}/{self.study.repeats} · {done} of {total} runs done")


def run_study(study: Study, *, port: int | None = None, verbose: bool = False, stream=None) -> StudyOutcome:
    """Run every run of ``study`` not done yet; return what is done."""
    show = Display(study, stream)
    keys = study.runs()
    outcome = StudyOutcome(total=len(keys), done=sum(layout.is_done(study, k) for k in keys), ran=0,
                           folder=layout.study_dir(study))
    _write_study_files(study)
    show.say(f"{outcome.total} runs ({len(study.engine_order())} engines × their workloads × "
             f"{study.repeats} repeats); {outcome.done} done before; results in {outcome.folder}")
    for name in study.engine_order():
        pending = [k for k in study.runs(name) if not layout.is_done(study, k)]
        if not pending:
            show.say(f"engine {name}: all {len(study.runs(name))} runs done; not started")
            continue
        _run_engine(study, name, pending, port, verbose, show, outcome)
    show.say(f"{outcome.done} of {outcome.total} runs done" + (f"; failed: {', '.join(outcome.failed)}"
                                                               if outcome.failed else ""))
    return outcome


def _write_study_files(study: Study) -> None:
    folder = layout.study_dir(study)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "study.toml").write_text(study.source, encoding="utf-8")
    layout.write_json_atomic(folder / "study.json", study_record(study))


def study_record(study: Study) -> dict:
    """The resolved study: what each engine and workload meant, and the run order."""
    engines = {n: {"embedded": e.embedded, "kind": e.spec.kind if e.spec else "vllm",
                   "model": e.spec.model if e.spec else "embedded", "args": list(e.args), "env": e.env,
                   "description": e.description} for n, e in study.engines.items()}
    workloads = {n: {"argv": list(w.argv), "description": w.description} for n, w in study.workloads.items()}
    return {"name": study.name, "file": str(study.path), "sha256": study.source_sha256,
            "description": study.description, "repeats": study.repeats, "seed": study.seed,
            "warmup": study.warmup, "engines": engines, "workloads": workloads,
            "pairs": [list(p) for p in study.pairs], "hardware": hardware()}


def _run_engine(study: Study, name: str, pending: list[RunKey], port, verbose, show, outcome) -> None:
    entry = study.engines[name]
    spec = resolve_spec(entry, port or entry.port or study.port)
    folder = layout.engine_dir(study, name)
    show.say(f"engine {study.engine_order().index(name) + 1}/{len(study.engine_order())} {name}: starting "
             f"({len(pending)} runs to do)")
    with start_engine(spec, folder) as engine:
        facts = {**engine_context(engine), **engine_facts(engine), "log_ready_bytes": _size(engine.log_path)}
        _warm_up(study, engine, pending[0], folder, show)
        facts["footprint_gib"] = footprint_gib(engine)
        layout.write_json_atomic(folder / "engine.json", facts)
        for key in pending:
            show.say(show.where(key, outcome.done, outcome.total))
            if _run_one(study, key, engine, facts, entry, verbose, show):
                outcome.done += 1
                outcome.ran += 1
            else:
                outcome.failed.append(f"{key.engine}/{key.workload}/{key.repeat}")
                _check_alive(engine)


def _check_alive(engine) -> None:
    """A run with no completed request may mean the engine died: then the rest cannot run."""
    if not engine.alive():
        lines = "\n".join(f"  | {line}" for line in engine.last_log_lines(20))
        raise EngineError(f"engine {engine.spec.name!r} died during the study (completed runs are kept); "
                          f"last log lines:\n{lines}")


def resolve_spec(entry: EngineEntry, port: int) -> EngineSpec:
    """The spec to launch: the embedded one built now (it may convert the model first);
    vLLM gets dev mode so the study can empty its prefix cache between runs."""
    if entry.embedded:
        base = embedded_engine_spec(port=port)
        spec = dataclasses.replace(base, name=entry.name, args=(*base.args, *entry.args), env=entry.env,
                                   ready_timeout_s=entry.ready_timeout_s)
    else:
        spec = dataclasses.replace(entry.spec, port=port) if entry.port is None else entry.spec
    if spec.kind == "vllm" and entry.reset_prefix_cache and "VLLM_SERVER_DEV_MODE" not in spec.env:
        spec = dataclasses.replace(spec, env={**spec.env, "VLLM_SERVER_DEV_MODE": "1"})
    return spec


def _warm_up(study: Study, engine, key: RunKey, folder: Path, show: Display) -> None:
    """A few requests shaped like the first workload, with another seed (other prompts),
    so the first measured run does not pay for the engine's first requests."""
    if study.warmup == 0:
        return
    workload = study.workloads[key.workload]
    argv = [*workload.argv, *_where_flags(engine), "--num-prompts", str(_warmup_prompts(workload, study.warmup)),
            "--seed", str(study.seed + 7919), "--disable-tqdm", "--no-telemetry"]
    args = parse_bench_argv(_known_only(argv), prog=f"warm-up {key.workload}")
    with _captured(folder / "warmup.txt", echo=False):
        warm = execute(args)
    show.say(f"engine {key.engine}: warmed up with {warm.summary.completed} requests "
             f"({warm.summary.failed} failed)")


def _warmup_prompts(workload, n: int) -> int:
    # prefix_repetition makes num_prompts // num_prefixes per prefix: at least one each
    args = parse_bench_argv(list(workload.argv))
    return max(n, args.prefix_repetition_num_prefixes) if args.dataset_name == "prefix_repetition" else n


def _known_only(argv: list[str]) -> list[str]:
    """Drop --no-telemetry where this servelab's bench has no such flag (telemetry is optional)."""
    from servelab.study.spec import bench_flags

    return [a for a in argv if a != "--no-telemetry" or a in bench_flags()]


def _where_flags(engine) -> list[str]:
    return ["--base-url", engine.base_url, "--model", engine.model]


def _run_one(study: Study, key: RunKey, engine, facts: dict, entry: EngineEntry, verbose: bool, show) -> bool:
    """One measured run; True when it completed and its marker is written."""
    folder = layout.run_dir(study, key)
    layout.clear(folder)
    reset = reset_prefix_cache(engine.base_url) if entry.reset_prefix_cache else "off"
    args = _bench_args(study, key, engine, folder)
    if key.repeat == 1:
        _save_prompts(args, folder / "prompts.json")
    context = {"engine": facts, "study": _study_context(study, key, reset)}
    started, log_from = time.monotonic(), _size(engine.log_path)
    with _captured(folder / "console.txt", echo=verbose):
        outcome = execute(args, context=context)
    _after_run(engine, folder, facts, log_from)
    if outcome.run.outcome.interrupted:
        raise KeyboardInterrupt  # the run was cut: no marker; the engine stops on the way out
    show.say("  " + run_line(outcome, time.monotonic() - started, folder))
    if outcome.exit_code != 0:
        return False
    layout.mark_done(study, key, {"wall_s": round(time.monotonic() - started, 2), "prefix_cache": reset,
                                  "finished": time.strftime("%Y-%m-%dT%H:%M:%S")})
    return True


def _bench_args(study: Study, key: RunKey, engine, folder: Path):
    """The workload's flags, plus where the engine is and where the result goes."""
    argv = [*study.workloads[key.workload].argv, *_where_flags(engine), "--save-result", "--result-dir",
            str(folder), "--result-filename", layout.RESULT_FILE, "--label", key.engine]
    return parse_bench_argv(argv, prog=f"workloads.{key.workload}")


def _study_context(study: Study, key: RunKey, reset: str) -> dict:
    return {"name": study.name, "file": str(study.path), "sha256": study.source_sha256, "engine": key.engine,
            "workload": key.workload, "repeat": key.repeat, "repeats": study.repeats,
            "config_hash": layout.config_hash(study, key), "prefix_cache": reset, "hardware": hardware()}


def _after_run(engine, folder: Path, facts: dict, log_from: int) -> None:
    """Beside the result: the engine's log (its start, then this run) and its memory report."""
    if engine.log_path.is_file():
        write_log_slice(engine.log_path, folder / "engine.log", facts.get("log_ready_bytes", 0), log_from)
    memory = {**engine.memory_report.to_dict(), "footprint_gib": facts.get("footprint_gib"),
              "checkpoint_gib": (facts.get("model_files") or {}).get("weights_gib")}
    (folder / "memory.json").write_text(json.dumps(memory, indent=1), encoding="utf-8")


def write_log_slice(source: Path, target: Path, head_end: int, run_from: int) -> None:
    """The log up to ready (what started, its memory lines), then only what this run added:
    earlier runs' request lines would repeat in every run's copy."""
    with open(source, "rb") as log, open(target, "wb") as out:
        out.write(log.read(head_end))
        if run_from > head_end:
            out.write(f"\n# servelab: {run_from - head_end} bytes of earlier runs left out\n".encode())
        log.seek(max(head_end, run_from))
        shutil.copyfileobj(log, out)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def run_line(outcome: BenchOutcome, wall_s: float, folder: Path) -> str:
    s = outcome.summary
    ttft = s.stats_ms["ttft"].mean if "ttft" in s.stats_ms else float("nan")
    return (f"{s.completed} ok, {s.failed} failed · {s.output_throughput:.1f} output tok/s · "
            f"mean TTFT {ttft:.0f} ms · {wall_s:.0f} s → {folder}")


def reset_prefix_cache(base_url: str) -> str:
    """"reset", "unsupported" (no such route: the engine keeps its cache) or "failed"."""
    request = urllib.request.Request(f"{base_url}/reset_prefix_cache", data=b"", method="POST")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for _ in range(RESET_TRIES):
        try:
            with opener.open(request, timeout=10) as response:
                if json.loads(response.read() or b"{}").get("success", True):
                    return "reset"
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 405):
                return "unsupported"
        except (OSError, ValueError):
            return "failed"
        time.sleep(0.5)
    return "failed"


def _save_prompts(args, path: Path) -> None:
    """The first prompts of this workload, for the report. Drawn again with the run's
    own seed, dataset and tokenizer — the same sample the run sends."""
    from servelab.datasets import sample_requests
    from servelab.datasets.tokenizer import load_tokenizer
    from servelab.flags.dataset import dataset_spec_from_args, tokenizer_spec_from_args

    with contextlib.redirect_stderr(io.StringIO()):  # its notes repeat in the run's own output
        tokenizer = load_tokenizer(tokenizer_spec_from_args(args))
        samples = sample_requests(dataset_spec_from_args(args), tokenizer)
    rows = [{"prompt": s.prompt, "prompt_len": s.prompt_len, "output_len": s.expected_output_len}
            for s in samples[:PROMPT_SAMPLES]]
    path.write_text(json.dumps(rows, indent=1), encoding="utf-8")


@contextlib.contextmanager
def _captured(path: Path, echo: bool):
    """stdout to ``path`` (the run's console block), and to the terminal too when ``echo``."""
    with open(path, "w", encoding="utf-8") as f:
        target = _Tee(f, sys.stdout) if echo else f
        with contextlib.redirect_stdout(target):
            yield


class _Tee(io.TextIOBase):
    def __init__(self, *streams) -> None:
        self.streams = streams

    def write(self, text: str) -> int:
        for s in self.streams:
            s.write(text)
        return len(text)

    def flush(self) -> None:
        for s in self.streams:
            s.flush()
