"""Token ids for the prefix cache when only a prompt's text and length are known.

Re-tokenizing thousands of prompts would cost more than simulating them, and the
real-time server receives text only. So a prompt's "ids" are hashes of its successive
4-character pieces, cut or padded (with ids unique to the prompt) to its token count.
What matters for the prefix cache holds: two prompts that share a beginning share the
ids of that beginning, and prompts that differ share nothing after the difference.
The cost: a shared prefix is matched at about 4 characters a token, not at the
tokenizer's exact boundaries — an approximation of the hit length, stated as such.
"""

from __future__ import annotations

CHARS_PER_ID = 4


def pseudo_token_ids(text: str, n_tokens: int) -> tuple[int, ...]:
    pieces = [hash(text[i:i + CHARS_PER_ID]) for i in range(0, min(len(text), n_tokens * CHARS_PER_ID),
                                                             CHARS_PER_ID)]
    if len(pieces) < n_tokens:
        salt = hash(text)
        pieces += [hash((salt, k)) for k in range(len(pieces), n_tokens)]
    return tuple(pieces)


def estimate_tokens(text: str) -> int:
    """Without a tokenizer: about 4 characters a token (at least 1)."""
    return max(1, -(-len(text) // CHARS_PER_ID))
