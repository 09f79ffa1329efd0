"""Imports flow one way: a module imports only from lower layers (or its own
package). See STYLE.md; a new top-level module must be given a layer here."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "servelab"

LAYERS = {
    "errors": -1,  # imports nothing: every module may raise its errors
    "__init__": 0, "records": 0, "config": 0, "clock": 0,
    "spec_checks": 0.5,  # the checks on config's values
    "datasets": 1, "client": 1, "metrics": 1, "mock": 1, "sim": 1,
    "loadgen": 2, "engines": 2, "flags": 2, "telemetry": 2, "results": 2,
    "search": 3, "diagnose": 3, "planner": 3, "quality": 3,
    "measure": 4, "reports": 4, "selftest": 4,
    "study": 4.1, "scale": 4.1, "sweep": 4.2,
    "optimize": 4.3,
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


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = ["servelab", *rel.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """Every servelab module ``path`` imports, at any depth (lazy imports inside functions count)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("servelab"):
            for alias in node.names:  # "from servelab.x import y": y may be a module of package x
                sub = f"{node.module}.{alias.name}"
                out.add(sub if sub in known else node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("servelab"))
    return {m for m in out if m in known}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), iteratively."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]

    def visit(root: str) -> None:
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter[0]
                counter[0] += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_cycles_are_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_anywhere_lazy_imports_included():
    names = {module_name(p): p for p in MODULES}
    graph = {name: imported_modules(path, set(names)) - {name} for name, path in names.items()}
    # a package's __init__ that re-exports its modules is not a cycle with them
    for name in graph:
        graph[name] = {m for m in graph[name] if not (name.startswith(m + ".") and names[m].name == "__init__.py")}
    assert cycles(graph) == []


def test_test_modules_have_unique_basenames():
    """tests/ has no __init__.py: pytest imports each test module by its basename, and a second
    module of one name stops the whole suite at collection."""
    names = [p.name for p in (SRC.parents[1] / "tests").rglob("*.py") if p.name != "conftest.py"]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def private_imports(path: Path) -> list[str]:
    """Each ``from servelab.x import _name`` in ``path``: a name its module keeps to itself."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("servelab"):
            found += [f"{path.relative_to(SRC)}:{node.lineno} {node.module}.{a.name}"
                      for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_module_imports_another_modules_private_name():
    """What a module shares it names without an underscore; a private name taken by another
    module is a seam nobody declared (issue 33: five such imports, two of them a pacer copied)."""
    assert [hit for path in MODULES for hit in private_imports(path)] == []
