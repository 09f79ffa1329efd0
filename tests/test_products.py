"""Each subcommand is implemented in the folder a newcomer would guess from its name,
and no product folder implements two products (issue 18: a folder per product)."""

import ast
from pathlib import Path

from servelab.cli.main import COMMANDS

SRC = Path(__file__).resolve().parents[1] / "src" / "servelab"

# command -> the package whose code it calls (the product's folder, or the layer that owns the job)
HOME = {
    "bench": "measure", "study": "study", "demo": "study", "sweep": "sweep", "tune": "sweep",
    "scale": "scale", "plan": "planner", "diagnose": "diagnose", "selftest": "selftest", "serve": "engines",
    "gpu": "telemetry", "mock": "mock", "data": "datasets", "compare": "reports", "report": "reports",
    "results": "results",
    "optimize": "optimize",
}
# The L4 products: one measured run, studies, sweeps and tuning, scale-out.
PRODUCTS = {"measure": {"bench"}, "study": {"study", "demo"}, "sweep": {"sweep", "tune"}, "scale": {"scale"},
            "optimize": {"optimize"}}


def cli_imports(command: str) -> set[str]:
    """The servelab packages cli/<command>.py imports (lazy imports included)."""
    path = SRC / "cli" / (COMMANDS[command][0].rsplit(".", 1)[1] + ".py")
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("servelab."):
            found.add(node.module.split(".")[1])
    return found


def test_every_command_has_a_home_and_its_cli_module_calls_into_it():
    assert set(HOME) == set(COMMANDS), "give the new command a home in tests/test_products.py"
    for command, home in HOME.items():
        assert home in cli_imports(command), f"servelab {command} should be implemented in servelab/{home}/"


def test_a_product_folder_implements_one_product():
    for folder, commands in PRODUCTS.items():
        assert (SRC / folder).is_dir()
        users = {c for c in COMMANDS if folder in cli_imports(c)}
        # report draws any product's results
        others = users - commands - {"report", "compare"}
        assert not others, f"servelab/{folder}/ is a product of {sorted(commands)}, yet {sorted(others)} call it"
        homes = {HOME[c] for c in commands}
        assert homes == {folder}, f"{sorted(commands)} should all live in servelab/{folder}/"
