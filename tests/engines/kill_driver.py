"""A minimal servelab for kill tests: start the fake engine, then wait (or fail) until killed.

    python kill_driver.py PORT LOG_DIR READY_FILE --ready-after S [--raise-after-ready]

SIGUSR1 raises RuntimeError wherever the driver is, standing in for any bug or
failure in the code that uses the engine. READY_FILE gets the engine's pgid once
it is ready; the fake engine's own --pid-file tells the test the pgid earlier.
"""

import argparse
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_helpers import fake_spec

from servelab.engines import sigterm_as_interrupt, start_engine


def injected(signum, frame):
    raise RuntimeError("injected failure")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("log_dir", type=Path)
    parser.add_argument("ready_file", type=Path)
    parser.add_argument("--ready-after", default="0")
    args = parser.parse_args()
    signal.signal(signal.SIGUSR1, injected)
    spec = fake_spec(args.port, "--grandchild", "--ready-after", args.ready_after,
                     "--pid-file", str(args.log_dir / "engine.pid"), ready_timeout_s=120)
    with sigterm_as_interrupt(), start_engine(spec, args.log_dir, progress=False) as engine:
        args.ready_file.write_text(str(engine.pid))
        while True:
            time.sleep(0.1)


if __name__ == "__main__":
    main()
