"""vLLM's ``hf`` dataset, read from a local copy of a Hugging Face hub dataset.

``--dataset-path`` is a local folder laid out as the hub repo is (data files by
split, as ``datasets.load_dataset`` reads a folder) or one data file;
``--hf-name`` is the hub id it is a copy of, and picks vLLM's recipe for it
(vLLM: ``--hf-name`` or else ``--dataset-path``). Nothing is ever downloaded: a
path that is not on disk is an error, and the library runs offline.

Rows are read and shuffled by Hugging Face's ``datasets`` library, as vLLM reads
them: streamed unless ``--no-stream``, then ``shuffle(seed=--seed)`` unless
``--disable-shuffle``. Its streaming shuffle (shard order, then a 1000-row buffer)
is not a permutation anyone can redo by hand, so the library is needed for the
same rows in the same order (``pip install 'servelab[hf]'``).

Each recipe is data (``RECIPES``): which columns make the prompt, whether the
output length comes from a reference answer (then vLLM's length filter applies)
or is fixed, whether the prompt is wrapped in the chat template. Hub datasets
that send images, video or audio, or need what servelab's client does not send,
are refused in one line (``REFUSED``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from servelab.config import DatasetSpec
from servelab.datasets.oversample import oversample
from servelab.datasets.tokenizer import Tokenizer
from servelab.errors import DatasetError, InputError
from servelab.records import SampleRequest


@dataclass(frozen=True, slots=True)
class Recipe:
    """How vLLM turns one row of a hub dataset into a request."""

    prompt: Callable[[dict], str]
    reference: Callable[[dict], str] | None = None  # the reply whose length is the output length
    output_len: int | None = None  # fixed output length (--hf-output-len overrides)
    chat_template: bool = False  # wrapped in the chat template unless --skip-chat-template
    always_chat_template: bool = False  # MLPerf: wrapped even with --skip-chat-template, as vLLM
    system: Callable[[dict], str] | None = None  # a system turn before the user's
    reference_special_tokens: bool = True  # the reference counted with the special tokens (vLLM: all but MLPerf)
    filter_fixed: bool = False  # MLPerf: the length filter applies to a fixed output length too
    length_filter: bool = True  # vLLM's length filter, applied when the reference sets the length
    max_prompt_len: int = 1024
    max_total_len: int = 2048
    split: str | None = None  # vLLM's default --hf-split / --hf-subset
    subset: str | None = None
    keep: Callable[[dict, DatasetSpec], bool] = lambda row, spec: True
    ids_count_dropped: bool = False  # blazedit numbers requests by row read, not by row kept
    honours_output_len: bool = True  # zeta ignores --hf-output-len


def _instruct_coder(row: dict) -> str:
    return f"{row['input']}\n\n{row['instruction']} Just output the code, do not include any explanation."


def _blazedit(row: dict) -> str:
    # the prompt of the Blazedit paper (ise-uiuc/blazedit), as vLLM sends it
    return ("Given a code file, please apply the change requests and generate the new file.\n\n"
            f"Original file:\n```python\n{row['code']}\n```\n\nChange request:\n{row['change_request']}\n\n"
            'Please generate the new code file in the "New file" section below.')


_ZETA = ("### Instruction:\nYou are a code completion assistant and your task is to analyze user edits and then "
         "rewrite an excerpt that the user provides, suggesting the appropriate edits within the excerpt, taking "
         "into account the cursor location.\n\n### User Edits:\n\n{}\n\n### User Excerpt:\n\n{}\n\n### Response:\n\n")


def _zeta_reference(row: dict) -> str:
    # the editable region onwards; str.find's -1 (no marker) keeps the last character, as vLLM's does
    return row["output"][row["output"].find("<|editable_region_start|>"):]


def _in_distance(row: dict, spec: DatasetSpec) -> bool:
    return spec.blazedit_min_distance <= row["norm_distance"] <= spec.blazedit_max_distance


_CONVERSATION = Recipe(prompt=lambda r: r["conversations"][0]["value"],
                       reference=lambda r: r["conversations"][1]["value"],
                       keep=lambda r, spec: len(r["conversations"]) >= 2)
_AIMO = Recipe(prompt=lambda r: r["problem"], reference=lambda r: r["solution"], max_prompt_len=2048,
               max_total_len=32000, split="train")
_MLPERF = Recipe(prompt=lambda r: r["question"], system=lambda r: r["system_prompt"], reference=lambda r: r["output"],
                 always_chat_template=True, reference_special_tokens=False, filter_fixed=True, split="train")
_BLAZEDIT = Recipe(prompt=_blazedit, output_len=4000, chat_template=True, split="train", keep=_in_distance,
                   ids_count_dropped=True)

# hub id -> recipe, for every text-only dataset of vLLM's hf family that servelab can send
RECIPES: dict[str, Recipe] = {
    "Aeala/ShareGPT_Vicuna_unfiltered": _CONVERSATION,
    "likaixin/InstructCoder": Recipe(prompt=_instruct_coder, output_len=200, chat_template=True, split="train"),
    "philschmid/mt-bench": Recipe(prompt=lambda r: r["turns"][0], output_len=256, chat_template=True,
                                  split="train"),
    "openai/openai_humaneval": Recipe(prompt=lambda r: r["prompt"], output_len=256, chat_template=True,
                                      split="test"),
    "openai/gsm8k": Recipe(prompt=lambda r: r["question"], output_len=256, chat_template=True, split="test",
                           subset="main"),
    "AI-MO/aimo-validation-aime": _AIMO,
    "AI-MO/NuminaMath-1.5": _AIMO,
    "AI-MO/NuminaMath-CoT": _AIMO,
    "zed-industries/zeta": Recipe(prompt=lambda r: _ZETA.format(r["events"], r["input"]), reference=_zeta_reference,
                                  split="train", length_filter=False, honours_output_len=False),
    "vdaita/edit_5k_char": _BLAZEDIT,
    "mgoin/mlperf-inference-llama2-data": _MLPERF,
    "mgoin/mlperf-inference-llama3.1-data": _MLPERF,
    "vdaita/edit_10k_char": _BLAZEDIT,
}

_IMAGES = "it sends images and servelab sends text only (no vision model is served here)"
_AUDIO = "it sends audio and servelab sends text only (no speech model is served here)"
# hub id -> why vLLM's recipe for it cannot run here
REFUSED: dict[str, str] = {
    **dict.fromkeys(("lmarena-ai/VisionArena-Chat", "lmarena-ai/vision-arena-bench-v0.1", "Lin-Chen/MMStar",
                     "lmms-lab/LLaVA-OneVision-Data"), _IMAGES),
    "yale-nlp/MMVU": "it sends videos and servelab sends text only (no vision model is served here)",
    **dict.fromkeys(("facebook/voxpopuli", "LIUM/tedlium", "edinburghcstr/ami", "speechcolab/gigaspeech",
                     "kensho/spgispeech"), _AUDIO),
    "gorilla-llm/Berkeley-Function-Calling-Leaderboard":
        "vLLM fetches its per-category files from the hub itself and sends per-request tool schemas; "
        "servelab reads no hub and its chat client sends no tools",
}


def sample_hf(spec: DatasetSpec, tokenizer: Tokenizer) -> list[SampleRequest]:
    name, recipe = _recipe(spec)
    rows = _rows(spec, recipe)
    source = f"hf {name} ({spec.path})"
    try:
        requests = list(_requests(spec, recipe, rows, tokenizer))
    except KeyError as exc:
        raise DatasetError(f"{source}: rows lack the column {exc} that {name} has") from None
    if not requests:
        raise DatasetError(f"{source}: no requests (every row filtered out, or the split is empty)")
    return oversample(requests, spec.num_prompts, spec.request_id_prefix, spec.seed, spec.oversample, source)


def _recipe(spec: DatasetSpec) -> tuple[str, Recipe]:
    if spec.path is None:
        raise DatasetError("--dataset-name hf needs --dataset-path: a local copy of the hub dataset "
                           "(servelab never downloads), with --hf-name naming the hub id it copies")
    name = spec.hf_name or spec.path
    if name in REFUSED:
        raise InputError(f"--dataset-name hf with {name} is not supported: {REFUSED[name]}")
    if name not in RECIPES:
        raise InputError(f"--dataset-name hf: unknown dataset {name!r}; pass --hf-name with the hub id the local "
                         f"copy is of, one of: {', '.join(RECIPES)}")
    if not Path(spec.path).exists():
        raise DatasetError(f"--dataset-path {spec.path}: no such local file or folder (servelab reads hf "
                           "datasets from disk only, never from the hub)")
    return name, RECIPES[name]


def _rows(spec: DatasetSpec, recipe: Recipe):
    """The rows in vLLM's order: loaded (streamed unless --no-stream) and shuffled by ``datasets``."""
    load_dataset = _load_dataset_function()
    split = spec.hf_split or recipe.split
    if split is None:
        raise InputError(f"--dataset-name hf with {spec.hf_name or spec.path}: pass --hf-split (vLLM has no "
                         "default split for it), e.g. --hf-split train")
    path = Path(spec.path)
    where = ({"path": str(path)} if path.is_dir() else {"path": _builder(path), "data_files": str(path)})
    try:
        data = load_dataset(**where, name=spec.hf_subset or recipe.subset, split=split, streaming=spec.hf_stream)
        return data.shuffle(seed=spec.seed) if spec.shuffle else data
    except (ValueError, FileNotFoundError, OSError, KeyError) as exc:  # no such split/subset, unreadable files
        raise DatasetError(f"--dataset-path {spec.path}: datasets cannot read it: {_first_line(exc)}") from None


def _load_dataset_function():
    # offline before the library reads its settings at import: a local copy must never reach for the hub
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    try:
        from datasets import load_dataset
    except ImportError:
        raise InputError("--dataset-name hf needs Hugging Face's datasets library (to read and shuffle rows as "
                         "vLLM does): pip install 'servelab[hf]'") from None
    return load_dataset


_BUILDERS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv", ".arrow": "arrow",
             ".txt": "text"}


def _builder(path: Path) -> str:
    """The ``datasets`` reader for one data file (vLLM takes folders only; a file reads as a folder of one)."""
    builder = _BUILDERS.get(path.suffix.lower())
    if builder is None:
        raise DatasetError(f"--dataset-path {path}: not a folder nor a {', '.join(_BUILDERS)} file")
    return builder


def _requests(spec: DatasetSpec, recipe: Recipe, rows, tokenizer: Tokenizer) -> Iterator[SampleRequest]:
    """Requests from the rows in order until --num-prompts are made: measured a batch at a time,
    since a filtered row is only known to be dropped once both texts are counted."""
    made = 0
    for batch in _batches(_kept(spec, recipe, rows), max(spec.num_prompts, 16)):
        for position, prompt, prompt_len, output_len in _measured(spec, recipe, batch, tokenizer):
            if made == spec.num_prompts:
                return
            number = position if recipe.ids_count_dropped else made
            yield SampleRequest(prompt, prompt_len, output_len, f"{spec.request_id_prefix}{number}")
            made += 1


def _kept(spec: DatasetSpec, recipe: Recipe, rows) -> Iterator[tuple[int, dict]]:
    """(row index as vLLM numbers it, row) for the rows the recipe keeps."""
    for position, row in enumerate(rows):
        if recipe.keep(row, spec):
            yield position, row


def _batches(items: Iterator, size: int) -> Iterator[list]:
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _measured(spec: DatasetSpec, recipe: Recipe, batch: list[tuple[int, dict]], tokenizer: Tokenizer):
    """(index, prompt, prompt_len, output_len) for the rows of ``batch`` that pass vLLM's length filter."""
    prompts = [recipe.prompt(row) for _, row in batch]
    if recipe.always_chat_template or (recipe.chat_template and not spec.skip_chat_template):
        systems = [recipe.system(row) if recipe.system else None for _, row in batch]
        prompts = [tokenizer.apply_chat_template(p, system=s) for p, s in zip(prompts, systems)]
    prompt_lens = [len(ids) for ids in tokenizer.encode_batch(prompts, add_special_tokens=True)]
    fixed = spec.hf_output_len if spec.hf_output_len is not None and recipe.honours_output_len else None
    fixed = fixed if fixed is not None else recipe.output_len
    if recipe.reference is None or fixed is not None:
        output_lens = [fixed] * len(batch)
    else:
        references = [recipe.reference(row) for _, row in batch]
        output_lens = [len(ids) for ids in tokenizer.encode_batch(references,
                                                                   add_special_tokens=recipe.reference_special_tokens)]
    filtered = recipe.length_filter and (recipe.filter_fixed or (recipe.reference is not None and fixed is None))
    for (position, _), prompt, n_in, n_out in zip(batch, prompts, prompt_lens, output_lens):
        if not filtered or _valid(n_in, n_out, recipe):
            yield position, prompt, n_in, n_out


def _valid(prompt_len: int, output_len: int, recipe: Recipe) -> bool:
    """vLLM's filter for rows whose reply sets the output length: neither side under 4
    tokens, the prompt and the pair within the recipe's limits."""
    return (min(prompt_len, output_len) >= 4 and prompt_len <= recipe.max_prompt_len
            and prompt_len + output_len <= recipe.max_total_len)


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
