"""Giving freed memory back to the system between a run's phases.

Python and the tokenizer's Rust code free their temporaries into the C heap, where glibc
keeps them; the run's numpy columns and gap blocks are large enough to be mapped on their
own, so they never reuse that space, and whatever a phase freed is held for the whole run.
Parsing Qwen3's ``tokenizer.json`` leaves ~55 MB so (151 -> 96 MB RSS once handed back),
preparing 500,000 requests ~60 MB (250 -> 190 MB).
"""

from __future__ import annotations

import ctypes
import functools
import gc

# A run of this many requests or more hands back what its preparation freed, and what its
# streams freed before the summary: at 500,000 requests ~60 MB each (250 -> 190 MB after a
# ShareGPT or random preparation). Below it there is little to give and a collection costs.
TRIM_FROM = 10_000


def release_freed(collect: bool = True) -> None:
    """Hand what was freed back to the system (glibc's ``malloc_trim``; a no-op elsewhere),
    after a full collection unless ``collect`` is false."""
    if collect:
        gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim():
    """glibc's, by its soname (``ctypes.util.find_library`` may run ldconfig or a compiler)."""
    try:
        return getattr(ctypes.CDLL("libc.so.6"), "malloc_trim", None)
    except OSError:  # not glibc
        return None
