"""The import graph of ``xferaudit/`` and ``bench/`` reads one way: no circles.

Built from the sources with ``ast``, as an import-graph reader sees them: every
import counts, the ones inside functions and under ``if TYPE_CHECKING:`` too,
relative ones resolved against their package. ``from pkg import name`` is an
edge to ``pkg.name`` where that is a module, else to ``pkg``. The bench scripts
import each other by their bare names (their folder is ``sys.path[0]``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _modules() -> dict[str, tuple[Path, bool]]:
    """module name -> (file, is a package's __init__); a C extension's source
    (``xferaudit/runtime/counted/_fastcount.c``) is a module that imports none of ours."""
    out: dict[str, tuple[Path, bool]] = {}
    for path in sorted((ROOT / "xferaudit").rglob("*.c")):
        out[".".join(path.relative_to(ROOT).with_suffix("").parts)] = (path, False)
    for path in sorted((ROOT / "xferaudit").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts.pop()
        out[".".join(parts)] = (path, is_pkg)
    for path in sorted((ROOT / "bench").glob("*.py")):
        out[path.stem] = (path, False)
    return out


def _imported(node: ast.AST, module: str, is_pkg: bool, known: dict) -> list[str]:
    """The known modules one import statement names."""
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            package = module.split(".") if is_pkg else module.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join(package + ([base] if base else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    out = []
    for name in names:
        # `import a.b.c` where only a.b is ours: the longest known prefix.
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            out.append(name)
    return out


def import_graph() -> dict[str, set[str]]:
    known = _modules()
    graph: dict[str, set[str]] = {}
    for module, (path, is_pkg) in known.items():
        edges: set[str] = set()
        if path.suffix == ".c":
            graph[module] = edges
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges.update(_imported(node, module, is_pkg, known))
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_sees_a_type_only_circle():
    graph = {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    assert cycles(graph) == [["a", "b"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_relative_and_type_only_imports_are_edges():
    graph = import_graph()
    # `from .source import ...` in the finder, resolved against its package.
    assert "xferaudit.static.front.source" in graph["xferaudit.static.front.finder"]
    # `from xferaudit.static import finder` names the module, not the package.
    assert "xferaudit.rules" in graph["xferaudit.static.front.finder"]


def test_the_import_graph_has_no_circle():
    found = cycles(import_graph())
    assert found == [], "import circles: " + "; ".join(" <-> ".join(c) for c in found)


RUNTIME = "xferaudit.runtime"
#: The runtime's layer folders, and the layers each may import (besides
#: itself). The counted path is the bottom: the wrappers' recorder imports
#: neither the guard, the report nor runs. ``""`` is ``xferaudit.runtime``
#: itself, the facade over every layer: only runs reaches up to it (the runner
#: turns counting on and takes the snapshot as a program would, ``xfer.count``).
RUNTIME_LAYERS = {
    "counted": set(),
    "reporting": {"counted"},
    "guarding": {"counted"},
    "ranks": {"counted", "reporting"},
    "runs": {"counted", "reporting", "guarding", "ranks"},  # (not the facade: it sits over them all)
}


def _runtime_layer(module: str):
    """The runtime layer a module is in ("" for the facade), or None outside the runtime."""
    if module == RUNTIME:
        return ""
    if not module.startswith(RUNTIME + "."):
        return None
    return module[len(RUNTIME) + 1:].split(".")[0]


def _runtime_edges_into_packs(graph: dict) -> list:
    return sorted(f"{m} -> {t}" for m, ts in graph.items() if _runtime_layer(m) is not None
                  for t in ts if t == "xferaudit.packs" or t.startswith("xferaudit.packs."))


def _runtime_edges_against_layers(graph: dict) -> list:
    bad = []
    for m, targets in graph.items():
        layer = _runtime_layer(m)
        if layer is None:
            continue
        if layer != "" and layer not in RUNTIME_LAYERS:
            bad.append(f"{m}: a runtime module outside the layer folders {sorted(RUNTIME_LAYERS)}")
            continue
        for t in targets:
            other = _runtime_layer(t)
            if other is None or other == layer or layer == "":
                continue
            if other not in RUNTIME_LAYERS[layer]:
                bad.append(f"{m} -> {t}")
    return sorted(bad)


def test_runtime_never_imports_packs():
    graph = import_graph()
    assert any(m.startswith(RUNTIME + ".counted.") for m in graph)  # (the graph holds the runtime)
    assert _runtime_edges_into_packs(graph) == []
    # The check sees such an edge where one is added, and the registry is the way round.
    graph["xferaudit.runtime.counted.crossing"] = graph["xferaudit.runtime.counted.crossing"] | {
        "xferaudit.packs.torch.devices"}
    assert _runtime_edges_into_packs(graph) == [
        "xferaudit.runtime.counted.crossing -> xferaudit.packs.torch.devices"]
    assert "xferaudit.registry" in graph[RUNTIME]
    assert "xferaudit.registry" in graph["xferaudit.packs"]


def test_runtime_layers_import_downward():
    graph = import_graph()
    layers = {_runtime_layer(m) for m in graph} - {None}
    assert layers == set(RUNTIME_LAYERS) | {""}
    assert _runtime_edges_against_layers(graph) == []
    for m, t in [("xferaudit.runtime.counted.recorder", "xferaudit.runtime.guarding.guard"),
                 ("xferaudit.runtime.reporting._report", "xferaudit.runtime.runs.budget"),
                 ("xferaudit.runtime.ranks.merging", RUNTIME),
                 ("xferaudit.runtime.runs.runner", RUNTIME)]:
        bent = {**graph, m: graph[m] | {t}}
        assert _runtime_edges_against_layers(bent) == [f"{m} -> {t}"]


def test_no_module_over_700_lines():
    """Every module of the package (and the C counted path) fits in 700 lines."""
    long = {}
    for path in sorted((ROOT / "xferaudit").rglob("*")):
        if path.suffix in (".py", ".c") and path.is_file():
            n = len(path.read_text(encoding="utf-8").splitlines())
            if n > 700:
                long[str(path.relative_to(ROOT))] = n
    assert long == {}, f"modules over 700 lines: {long}"


#: The static half's layers, lowest first, with the modules each holds (a
#: name holds itself and everything under it; the longest name wins). A module
#: may import its own layer and the layers below it, never one above it nor a
#: peer of the same height: values and the codemod's core know nothing of each
#: other, and the findings and the codemod's file runner neither.
STATIC_LAYERS = (
    (0, "records", ("xferaudit.static.site", "xferaudit.static.codes")),
    (1, "front end", ("xferaudit.static.front",)),
    (2, "values", ("xferaudit.static.values",)),
    (2, "codemod", ("xferaudit.static.codemod",)),
    (3, "project", ("xferaudit.static.project",)),
    (4, "codemod files", ("xferaudit.static.codemod.files",)),
    (4, "findings", ("xferaudit.static.findings",)),
    (5, "package", ("xferaudit.static",)),
)
#: What composes the static half: it never imports them.
STATIC_CALLERS = ("xferaudit.commands", "xferaudit.cli", "xferaudit.server", "xferaudit.flake8_plugin", "xferaudit.pytest_plugin", "xferaudit.__main__")


def _static_layer(module: str):
    """(height, name) of a module of the static half, or None outside it."""
    best = None
    for height, name, prefixes in STATIC_LAYERS:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), height, name)
    return best[1:] if best else None


def static_layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import of the static half that runs up or sideways, or out to what composes it."""
    out = []
    for module in sorted(graph):
        here = _static_layer(module)
        if here is None:
            continue
        for target in sorted(graph[module]):
            if any(target == c or target.startswith(c + ".") for c in STATIC_CALLERS):
                out.append(f"{module} -> {target} (the static half never imports what composes it)")
                continue
            there = _static_layer(target)
            if there is None or there[1] == here[1]:
                continue
            if there[0] >= here[0]:
                out.append(f"{module} ({here[1]}) -> {target} ({there[1]})")
    return out


def test_static_layers_import_downward():
    graph = import_graph()
    static = [m for m in graph if m == "xferaudit.static" or m.startswith("xferaudit.static.")]
    # Every folder of the static half has its place (a new one must be given one).
    for module in static:
        assert module == "xferaudit.static" or _static_layer(module)[1] != "package", module
    # Edges inside a layer and down to it are read (the check has something to see).
    assert "xferaudit.static.front.source" in graph["xferaudit.static.front.finder"]
    assert "xferaudit.static.front.finder" in graph["xferaudit.static.project.scan"]
    found = static_layer_violations(graph)
    assert found == [], "imports against the static layers:\n" + "\n".join(found)
    # The check sees an added edge: the finder importing the diagnostics, the
    # value layer the codemod, the codemod's core its file runner, the scan the CLI.
    for source, target in (
        ("xferaudit.static.front.finder", "xferaudit.static.findings.diagnostics"),
        ("xferaudit.static.values.checks", "xferaudit.static.codemod.wrap"),
        ("xferaudit.static.codemod.wrap", "xferaudit.static.codemod.files"),
        ("xferaudit.static.project.scan", "xferaudit.commands.check"),
    ):
        bad = {**graph, source: graph[source] | {target}}
        assert static_layer_violations(bad), (source, target)
