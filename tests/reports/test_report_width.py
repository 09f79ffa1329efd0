"""The comparison table of three configs fits the page in a real browser (issue 19 item 14:
with three configs the last column was hidden behind a scroll bar, and lost when printed).

Headless Chromium lays the report out at a page's width; a script (added to a copy, since
the report's own policy allows none) writes each table's overflow into the title, which
``--dump-dom`` prints. Skipped where Chromium is not installed (scripts/setup.sh installs it).
"""

import re
import shutil
import subprocess
from pathlib import Path

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
    found = re.fullmatch(r"overflow:([\d,-]*)", loaded_title(html, tmp_path, width, MEASURE))
    assert found
    return [int(x) for x in found.group(1).split(",") if x]


def loaded_title(html: str, tmp_path, width: int, script: str) -> str:
    """The page's title once ``script`` (put before </body>) has written its measures there."""
    page = tmp_path / f"measured-{width}.html"
    page.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html).replace("</body>", script))
    argv = [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / f'profile-{width}'}", f"--window-size={width},1200",
            "--dump-dom", page.as_uri()]
    dom = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False).stdout
    found = re.search(r"<title>(.*?)</title>", dom)
    assert found, dom[-2000:]
    return found.group(1)


@pytest.mark.skipif(CHROMIUM is None, reason="apt-get install -y chromium")
def test_three_configs_fit_a_printed_page_width(tmp_path):
    runs = {c: {"w": [{"output_throughput": 100.0 + i}, {"output_throughput": 101.0 + i}]}
            for i, c in enumerate(CONFIGS)}
    html_path, _ = write_report(make_study(tmp_path, runs))
    html = html_path.read_text()
    assert "max-num-seqs=32" in html  # the columns are there, shortened with a legend
    for width in (1100, 760):  # the report's width, and about an A4 page's printable width
        assert overflow(html, tmp_path, width) and all(x <= 0 for x in overflow(html, tmp_path, width))


# The optimize note (optimize/report.py): every table and command inside the page's width, the
# operating point's plot drawn at a readable size.
NOTE_MEASURE = ("<script>addEventListener('load', () => { const plot = document.querySelector('svg.plot'); "
                "const box = plot ? plot.getBoundingClientRect() : {width: 0, height: 0}; "
                "const root = document.documentElement; document.title = 'boxes:' + "
                "[...document.querySelectorAll('div.wide, pre.cmd')].map(d => d.scrollWidth - d.clientWidth).join(',') "
                "+ ' page:' + (root.scrollWidth - root.clientWidth) + ' plot:' + Math.round(box.width) + 'x' "
                "+ Math.round(box.height) + ' tables:' + document.querySelectorAll('table').length; });"
                "</script></body>")
OPTIMIZE_DATA = Path(__file__).resolve().parents[1] / "optimize" / "data"


@pytest.mark.skipif(CHROMIUM is None, reason="apt-get install -y chromium")
@pytest.mark.parametrize("fixture, wide", [("report_throughput", 5), ("report_external", 4),  # 3 tables + commands
                                           ("example_optimize", 5)])  # the loop's own, once its branch is merged
def test_optimize_note_renders_in_a_browser(tmp_path, fixture, wide):
    from servelab.optimize.report import write_report

    source = OPTIMIZE_DATA / f"{fixture}.json"
    if not source.is_file():
        pytest.skip(f"{source.name} is not here yet (branch optimize)")
    (tmp_path / "optimize.json").write_text(source.read_text())
    html = write_report(tmp_path)[0].read_text()
    for width in (1100, 760):
        title = loaded_title(html, tmp_path, width, NOTE_MEASURE)
        found = re.fullmatch(r"boxes:([\d,-]*) page:(-?\d+) plot:(\d+)x(\d+) tables:(\d+)", title)
        assert found, title
        boxes = [int(x) for x in found.group(1).split(",") if x]
        assert len(boxes) == wide and all(x <= 0 for x in boxes), title  # external: no serve line
        assert int(found.group(2)) <= 0, title  # nothing wider than the window
        plot_w, plot_h = int(found.group(3)), int(found.group(4))
        assert 300 <= plot_w <= width and plot_h >= 100, title
        assert int(found.group(5)) == 3, title
