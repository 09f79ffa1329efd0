"""The comparison table of three configs fits the page in a real browser (issue 19 item 14:
with three configs the last column was hidden behind a scroll bar, and lost when printed).

Headless Chromium lays the report out at a page's width; a script (added to a copy, since
the report's own policy allows none) writes each table's overflow into the title, which
``--dump-dom`` prints. Skipped where Chromium is not installed (scripts/setup.sh installs it).
"""

import re
import shutil
import subprocess

import pytest
from study_factory import make_study

from servelab.reports.report import write_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
MEASURE = ("<script>addEventListener('load', () => { document.title = 'overflow:' + "
           "[...document.querySelectorAll('div.wide')].map(d => d.scrollWidth - d.clientWidth).join(','); });"
           "</script></body>")
# Names as `servelab tune` gives its configs: long, sharing most of their text.
CONFIGS = ("model=Qwen3-8B-AWQ,max-num-seqs=8,enable-prefix-caching=off",
           "model=Qwen3-8B-AWQ,max-num-seqs=32,enable-prefix-caching=off",
           "model=Qwen3-8B-AWQ,max-num-seqs=128,enable-prefix-caching=off")


def overflow(html: str, tmp_path, width: int) -> list[int]:
    page = tmp_path / f"measured-{width}.html"
    page.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html).replace("</body>", MEASURE))
    argv = [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / f'profile-{width}'}", f"--window-size={width},1200",
            "--dump-dom", page.as_uri()]
    dom = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False).stdout
    found = re.search(r"<title>overflow:([\d,-]*)</title>", dom)
    assert found, dom[-2000:]
    return [int(x) for x in found.group(1).split(",") if x]


@pytest.mark.skipif(CHROMIUM is None, reason="apt-get install -y chromium")
def test_three_configs_fit_a_printed_page_width(tmp_path):
    runs = {c: {"w": [{"output_throughput": 100.0 + i}, {"output_throughput": 101.0 + i}]}
            for i, c in enumerate(CONFIGS)}
    html_path, _ = write_report(make_study(tmp_path, runs))
    html = html_path.read_text()
    assert "max-num-seqs=32" in html  # the columns are there, shortened with a legend
    for width in (1100, 760):  # the report's width, and about an A4 page's printable width
        assert overflow(html, tmp_path, width) and all(x <= 0 for x in overflow(html, tmp_path, width))
