"""The elapsed-time line for slow preparation steps: only on a terminal, only once slow."""

import io
import re
import time

from servelab.loadgen.progress import elapsed


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_slow_step_on_a_terminal_shows_its_time_then_erases_it():
    out = Terminal()
    with elapsed("preparing 8 requests (sharegpt)", stream=out, after_s=0.01):
        time.sleep(0.3)
    text = out.getvalue()
    assert re.search(r"\r\x1b\[2K\[preparing 8 requests \(sharegpt\)\] \d+\.\d s", text), text
    assert text.endswith("\r\x1b[2K")


def test_a_quick_step_or_a_log_shows_nothing():
    quick, log = Terminal(), io.StringIO()
    with elapsed("x", stream=quick, after_s=5.0):
        pass
    with elapsed("x", stream=log, after_s=0.0):
        time.sleep(0.05)
    assert quick.getvalue() == "" and log.getvalue() == ""
