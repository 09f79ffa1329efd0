"""``--multi-turn`` and its options: servelab's own flags (``vllm bench serve`` has none)."""

from __future__ import annotations

import argparse

from servelab.config import MultiTurnSpec


def add_multi_turn_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("multi-turn conversations (servelab)")
    g.add_argument("--multi-turn", action="store_true",
                   help="replay each conversation turn by turn (sharegpt: its human/gpt pairs; custom: lines "
                        "with a 'turns' list), each turn sent after the previous reply with the whole history "
                        "(earlier user turns and the server's actual replies); --num-prompts counts "
                        "conversations, --request-rate paces their starts, --max-concurrency caps requests "
                        "in flight; needs --backend openai-chat")
    g.add_argument("--multi-turn-think-time", type=float, default=0.0, metavar="SECONDS",
                   help="pause between a reply's end and the next turn's send (default: %(default)s)")
    g.add_argument("--multi-turn-max-turns", type=int, default=None, metavar="N",
                   help="send at most the first N turns of each conversation (default: all)")
    g.add_argument("--multi-turn-no-history", action="store_true",
                   help="send each turn alone, without the earlier turns: the same requests with no shared "
                        "prefix, the control for a prefix-caching comparison")


def multi_turn_spec(args: argparse.Namespace) -> MultiTurnSpec:
    return MultiTurnSpec(enabled=args.multi_turn, think_time_s=args.multi_turn_think_time,
                         history=not args.multi_turn_no_history, max_turns=args.multi_turn_max_turns)
