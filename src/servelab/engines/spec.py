"""What an engine is: a named, frozen spec (layer 2, no I/O).

A spec says *what* to run; ``ENGINES[spec.kind]`` says *how* (see ``kinds.py``).
Validation here is only about the spec's own shape; whether the model path
exists or the port is free is checked at launch, where it can change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from servelab.config import ENGINE_KINDS
from servelab.errors import InputError

KINDS = ENGINE_KINDS

# Flags the spec owns: passing them again in ``args`` would silently fight
# ``host``/``port`` (vLLM takes the last one, our ready check the first).
_OWNED_FLAGS = ("--host", "--port")


# The one default port: serve, bench, studies, sweeps, tuning and the demo all listen or look here.
DEFAULT_PORT = 8000


@dataclass(frozen=True, slots=True)
class EngineSpec:
    """One engine to launch (or, for ``external``, to reach).

    kind:      one of ``KINDS``.
    model:     what the engine serves: a local path or a hub id (vllm), a GGUF
               file (llamacpp); for external/command only a label.
    args:      extra command-line flags, passed through untouched.
    env:       extra environment for the engine process (on top of ours).
    url:       external only: the server's base URL.
    command:   command only: the argv to run.
    ready_url: command only: GET it until it answers 2xx.
    """

    name: str
    kind: str
    model: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    ready_timeout_s: float = 600.0
    url: str | None = None
    command: tuple[str, ...] = ()
    ready_url: str | None = None

    def __post_init__(self) -> None:
        # Lists are convenient to pass; tuples keep the spec hashable-ish and frozen for real.
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "command", tuple(self.command))
        object.__setattr__(self, "env", dict(self.env))
        validate(self)

    @property
    def base_url(self) -> str:
        if self.kind == "external":
            return (self.url or "").rstrip("/")
        return f"http://{_url_host(self.host)}:{self.port}"


def validate(spec: EngineSpec) -> None:
    """Raise InputError naming the first thing wrong with the spec."""
    if spec.kind not in KINDS:
        raise InputError(f"unknown engine kind {spec.kind!r} (choose from {', '.join(KINDS)})")
    if not 0 < spec.port < 65536:
        raise InputError(f"engine {spec.name!r}: port {spec.port} is not in 1..65535")
    if spec.ready_timeout_s <= 0:
        raise InputError(f"engine {spec.name!r}: ready_timeout_s must be > 0")
    _validate_kind_fields(spec)
    owned = [a for a in spec.args if a.split("=", 1)[0] in _OWNED_FLAGS]
    if owned and spec.kind in ("embedded", "vllm", "llamacpp", "sim"):
        raise InputError(f"engine {spec.name!r}: set host/port on the spec, not in args ({owned[0]})")


def _validate_kind_fields(spec: EngineSpec) -> None:
    if spec.kind == "embedded" and (spec.model or spec.url or spec.command or spec.ready_url):
        raise InputError(f"engine {spec.name!r}: the embedded engine has its own model (vLLM's CPU build "
                         "serving SmolLM2-135M-Instruct); model/url/command/ready_url do not apply")
    if spec.kind in ("vllm", "llamacpp") and not spec.model:
        raise InputError(f"engine {spec.name!r}: kind {spec.kind} needs a model")
    if spec.kind == "external" and not (spec.url or "").startswith(("http://", "https://")):
        raise InputError(f"engine {spec.name!r}: kind external needs url=http(s)://host:port")
    if spec.kind == "command" and not spec.command:
        raise InputError(f"engine {spec.name!r}: kind command needs a command line")
    if spec.kind == "command" and not (spec.ready_url or "").startswith(("http://", "https://")):
        raise InputError(f"engine {spec.name!r}: kind command needs ready_url=http(s)://…")
    if spec.kind == "command" and not 0 < (url_port(spec.ready_url) or 0) < 65536:
        raise InputError(f"engine {spec.name!r}: ready_url {spec.ready_url} has no valid port")
    if spec.kind == "command" and url_port(spec.ready_url) != spec.port:
        # The bench, /metrics and the stop check (port free again) all go to ``port``.
        raise InputError(f"engine {spec.name!r}: ready_url {spec.ready_url} is on port {url_port(spec.ready_url)} "
                         f"but the engine's port is {spec.port}; set the port the command listens on")


def url_port(url: str | None) -> int | None:
    """The port of an http(s) URL, its scheme's default when it names none; None if malformed."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url or "")
        return parts.port if parts.port is not None else {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return None


def _url_host(host: str) -> str:
    # A wildcard bind address is not something a client can connect to.
    if host in ("0.0.0.0", "", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def flag_value(args: list[str] | tuple[str, ...], flag: str) -> str | None:
    """The value of the last ``flag V`` or ``flag=V`` in an engine's argv (the engine takes the last)."""
    value = None
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value
