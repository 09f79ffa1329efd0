"""A mock replica for ``servelab scale`` tests, launched as a command engine:

    python stagger_mock.py {port} {replica} PIDDIR --ttft-ms T --stagger-ms S --itl-ms I
                           --output-len L --len-step D [--fail-replica K]

Replica r serves with TTFT T + r·S (its ramp-up is staggered: it ends r·S later) and
output length L + r·D, so its steady rate is known: request rate × (L + r·D). It
writes its pid to PIDDIR/replica-<r>.pid; replica K (if given) fails at once instead.
"""

import argparse
import sys
from pathlib import Path

from servelab.mock.config import MockConfig
from servelab.mock.launch import serve_until_signal

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    for name in ("port", "replica"):
        p.add_argument(name, type=int)
    p.add_argument("piddir", type=Path)
    for name in ("--ttft-ms", "--stagger-ms", "--itl-ms"):
        p.add_argument(name, type=float, default=0.0)
    p.add_argument("--output-len", type=int, default=16)
    p.add_argument("--len-step", type=int, default=0)
    p.add_argument("--fail-replica", type=int, default=None)
    a = p.parse_args()
    import os

    (a.piddir / f"replica-{a.replica}.pid").write_text(str(os.getpid()))
    if a.replica == a.fail_replica:
        print(f"boom: replica {a.replica} refuses to start", flush=True)
        sys.exit(3)
    config = MockConfig(port=a.port, ttft_ms=a.ttft_ms + a.replica * a.stagger_ms, itl_ms=a.itl_ms,
                        output_len=a.output_len + a.replica * a.len_step)
    sys.exit(serve_until_signal(config, None))
