"""The KV cache as vLLM V1 keeps it: fixed-size blocks, a prefix cache of full blocks.

Facts followed (vLLM's ``v1/core/kv_cache_manager.py`` and ``block_pool.py``):
* A block is keyed by a chained hash: (parent block's hash, this block's token ids), so
  two prompts share block k only if they agree on every token up to its end. Only full
  blocks are hashed.
* A lookup may hit at most ``floor((num_tokens − 1) / block_size)`` blocks: even a
  prompt found whole must compute its last token to get logits.
* Prefix-cache statistics are in tokens: queries += the request's tokens, hits += the
  tokens found.
* A freed block that carries a hash stays in the cache, evictable: it counts as free,
  and is evicted least-recently-freed first when a new block is needed. A request frees
  its blocks last-first, so a prompt's later blocks go before its shared head.
* Usage (``vllm:kv_cache_usage_perc``) = 1 − free blocks / all blocks.
"""

from __future__ import annotations

from collections import OrderedDict


def block_hashes(token_ids, block_size: int) -> list[int]:
    """Chained hashes of the full blocks of ``token_ids`` (a trailing partial block has none)."""
    hashes, parent = [], 0
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = hash((parent, tuple(token_ids[start:start + block_size])))
        hashes.append(parent)
    return hashes


class BlockPool:
    """Counts blocks; cached ones are tracked by hash (the simulator needs no block ids)."""

    __slots__ = ("num_blocks", "free_plain", "refs", "evictable")

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self.free_plain = num_blocks  # free blocks that hold nothing cached
        self.refs: dict[int, int] = {}  # hash -> requests using the cached block
        self.evictable: OrderedDict[int, None] = OrderedDict()  # cached, unused; oldest first

    @property
    def free(self) -> int:
        return self.free_plain + len(self.evictable)

    @property
    def usage(self) -> float:
        return 1.0 - self.free / self.num_blocks

    def longest_hit(self, hashes: list[int], max_blocks: int) -> list[int]:
        hit = []
        refs = self.refs
        for h in hashes[:max_blocks]:
            if h not in refs:
                break
            hit.append(h)
        return hit

    def can_take(self, new_blocks: int, hit: list[int]) -> bool:
        """A hit on an evictable block takes it out of the free count, as vLLM counts it."""
        revived = sum(1 for h in hit if self.refs[h] == 0)
        return new_blocks + revived <= self.free

    def take(self, new_blocks: int, hit: list[int]) -> None:
        for h in hit:
            if self.refs[h] == 0:
                del self.evictable[h]
            self.refs[h] += 1
        self.take_plain(new_blocks)

    def take_plain(self, n: int) -> None:
        """n new blocks: free plain ones first, then evict the oldest cached ones."""
        plain = min(n, self.free_plain)
        self.free_plain -= plain
        for _ in range(n - plain):
            h, _ = self.evictable.popitem(last=False)
            del self.refs[h]

    def cache(self, h: int) -> bool:
        """A request's own block became full with hash h: cache it unless an equal block
        already is (then the request keeps its copy uncached). True if cached."""
        if h in self.refs:
            return False
        self.refs[h] = 1
        return True

    def reset(self) -> int:
        """vLLM's /reset_prefix_cache: forget every cached block no request uses; returns
        how many (blocks in use stay, as they do in vLLM, which refuses while any are)."""
        dropped = len(self.evictable)
        for h in self.evictable:
            del self.refs[h]
        self.evictable.clear()
        self.free_plain += dropped
        return dropped

    def release(self, hashes: list[int], plain: int) -> None:
        for h in reversed(hashes):
            self.refs[h] -= 1
            if self.refs[h] == 0:
                self.evictable[h] = None
        self.free_plain += plain
