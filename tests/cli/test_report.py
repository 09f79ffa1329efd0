"""``servelab report STUDY_DIR``: writes report.html and report.md beside the results."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reports"))
from study_factory import make_study

from servelab.cli import main


def test_report_writes_html_and_markdown(tmp_path, capsys):
    folder = make_study(tmp_path, {"base": {"w": [{}, {}]}, "other": {"w": [{"output_throughput": 50.0}] * 2}})
    assert main.main(["report", str(folder)]) == 0
    assert capsys.readouterr().out == f"report:   {folder / 'report.html'}\nmarkdown: {folder / 'report.md'}\n"
    html = (folder / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "<h1>Study s</h1>" in html
    assert "0.50× −50.0% worse" in html and "Methodology and limits" in html
    assert "0.50× −50.0% worse" in (folder / "report.md").read_text()


def test_report_needs_a_folder_with_runs(tmp_path, capsys):
    assert main.main(["report", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err == f"servelab: error: {tmp_path / 'nope'} does not exist (give a study's results folder, or result files)\n"
    (tmp_path / "empty").mkdir()
    assert main.main(["report", str(tmp_path / "empty")]) == 2
    assert "no result files" in capsys.readouterr().err
