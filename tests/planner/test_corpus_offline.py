"""planner/corpus/ is the offline pipeline: no command reaches it, however lazily it imports.

The walk starts at ``servelab.cli.main`` and follows every ``import`` and ``from ... import`` in
each module it reaches (inside functions too), and every string constant naming a servelab module
(``cli.main`` picks a command's module by name), so a lazy import cannot hide an edge.
"""

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
MODULE_NAME = re.compile(r"servelab(\.\w+)+")


def source(module: str) -> Path | None:
    base = SRC.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def with_packages(module: str) -> list[str]:
    """Importing a.b.c runs a/__init__ and a/b/__init__ first."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def imported(module: str, path: Path) -> set[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)  # kept below only if a module
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_NAME.fullmatch(node.value):
            out.add(node.value)
    return {name for found in out for name in with_packages(found) if source(name)}


def reachable(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        module = todo.pop()
        if module in seen or not module.startswith("servelab"):
            continue
        seen.add(module)
        todo.extend(imported(module, source(module)))
    return seen


def test_no_command_reaches_the_offline_pipeline():
    reached = reachable("servelab.cli.main")
    # the walk sees what a command runs, lazy imports included: plan reads the fitted constants
    assert {"servelab.cli.plan", "servelab.planner.speed_model", "servelab.planner.bands",
            "servelab.planner.calibrate"} <= reached
    assert sorted(m for m in reached if m.startswith("servelab.planner.corpus")) == []


def test_the_walk_follows_the_pipelines_own_imports():
    reached = reachable("servelab.planner.corpus.fit")
    assert {"servelab.planner.corpus", "servelab.planner.corpus.rows", "servelab.planner.corpus.replay",
            "servelab.planner.calibrate"} <= reached
