"""``python -m servelab.mock CONFIG_JSON [TRUTH_FILE]``: the child process behind
``run_in_subprocess`` (no argparse, nothing to import but the mock)."""

import json
import sys

from servelab.mock.config import MockConfig
from servelab.mock.launch import serve_until_signal

if __name__ == "__main__":
    config = MockConfig.from_dict(json.loads(sys.argv[1]))
    sys.exit(serve_until_signal(config, sys.argv[2] if len(sys.argv) > 2 else None))
