"""A stand-in engine for lifecycle tests: a tiny HTTP server that behaves like a
slow, dying, stubborn or forking LLM server on demand. Run as a script:

    python fake_engine.py --port N [--ready-after S] [--die-after S] [--grandchild]
                          [--ignore-term] [--pid-file F] [--no-listen]

It prints vLLM-like startup lines so the memory report has something to read.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

START = time.monotonic()
ARGS = None

METRICS = (
    '# TYPE vllm:cache_config_info gauge\n'
    'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="2912"} 1.0\n'
)


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        ready = time.monotonic() - START >= ARGS.ready_after
        if self.path == "/health":
            self._send(200 if ready else 503, b"")
        elif self.path == "/v1/models" and ready:
            self._send(200, json.dumps({"data": [{"id": "fake-model"}]}).encode())
        elif self.path == "/metrics":
            self._send(200, METRICS.encode())
        else:
            self._send(404, b"")

    def _send(self, status, body):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ready-after", type=float, default=0.0)
    parser.add_argument("--die-after", type=float)
    parser.add_argument("--grandchild", action="store_true")
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--pid-file")
    parser.add_argument("--no-listen", action="store_true")  # alive, but never binds its port
    ARGS = parser.parse_args()
    if ARGS.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if ARGS.grandchild:  # stays in our process group, like vLLM's EngineCore
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    if ARGS.pid_file:
        with open(ARGS.pid_file + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(ARGS.pid_file + ".tmp", ARGS.pid_file)
    print("INFO fake engine starting", flush=True)
    print("INFO [kv_cache_utils.py:1] GPU KV cache size: 46,592 tokens, "
          "Maximum concurrency for 2,048 tokens per request: 22.75x", flush=True)
    if ARGS.die_after is not None:
        threading.Timer(ARGS.die_after, _die).start()
    if ARGS.no_listen:  # alive until signalled, its port never bound
        while True:
            signal.pause()
    ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler).serve_forever()


def _die():
    print("ERROR fake engine: CUDA out of memory (simulated)", flush=True)
    os._exit(3)


if __name__ == "__main__":
    main()
