"""Imports flow one way: a module imports only from lower layers (or its own
package). See STYLE.md; a new top-level module must be given a layer here."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "servelab"

LAYERS = {
    "__init__": 0, "records": 0, "errors": 0, "config": 0,
    "datasets": 1, "client": 1, "metrics": 1, "mock": 1, "sim": 1,
    "loadgen": 2, "engines": 2, "flags": 2, "telemetry": 2, "results": 2,
    "search": 3, "diagnose": 3, "planner": 3,
    "study": 4, "reports": 4, "selftest": 4, "demo": 4,
    "cli": 5,
}


def top(module_path: Path) -> str:
    rel = module_path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


def imported_tops(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("servelab"):
            parts = node.module.split(".")
            if len(parts) > 1:
                out.add(parts[1])
            else:  # "from servelab import x"
                out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "servelab" and len(parts) > 1:
                    out.add(parts[1])
    return out


MODULES = sorted(SRC.rglob("*.py"))


def test_every_top_level_module_has_a_layer():
    missing = sorted({top(p) for p in MODULES} - set(LAYERS))
    assert not missing, f"give these a layer in tests/test_layers.py: {missing}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_go_down_only(path):
    mine = top(path)
    for other in imported_tops(path):
        if other == mine or other == "__version__":
            continue
        assert LAYERS[other] < LAYERS[mine], f"{path.relative_to(SRC)} (layer {LAYERS[mine]}) imports {other} (layer {LAYERS[other]})"


def test_help_imports_nothing_heavy():
    import subprocess
    import sys

    code = ("import sys; from servelab.cli import main; "
            "import contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try: main.main(['--help'])\n"
            "    except SystemExit: pass\n"
            "heavy = [m for m in ('numpy', 'tokenizers', 'torch', 'vllm', 'transformers') if m in sys.modules]\n"
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
