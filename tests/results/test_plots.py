"""results/plots.py's matplotlib opener, the one every picture goes through, with and without matplotlib."""

import sys
from types import SimpleNamespace

import pytest

from servelab.errors import InputError
from servelab.results import plots
from servelab.sweep.plots import draw


def test_without_matplotlib_each_user_gets_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    assert plots.has_matplotlib() is False
    with pytest.raises(InputError, match=r"^plots need matplotlib: pip install 'servelab\[plot\]'$"):
        plots.pyplot()
    with pytest.raises(InputError, match=r"^--plot-timeline needs matplotlib: pip install 'servelab\[plot\]'$"):
        plots.require_matplotlib("--plot-timeline")
    assert draw(SimpleNamespace(points=[1], slo=None), tmp_path) == []  # a sweep still runs, without its curves
    assert capsys.readouterr().err == "servelab: no plots (pip install matplotlib)\n"


def test_pyplot_draws_to_files_only():
    pytest.importorskip("matplotlib")
    plt = plots.pyplot()
    assert plots.has_matplotlib() is True
    assert plt.get_backend().lower() == "agg"  # never a window, even with a display
    plots.require_matplotlib("--plot-timeline")  # no error
