"""No import cycle in multinode/, components/, policy/: module-level and function-level imports alike.

Imports are read with `ast` (nothing is imported). An edge A -> B exists when A has an import
statement anywhere (module body, function, class, try block) that loads B:
- `import a.b.c` and `from a.b import c` load a.b.c when it is a module (else a.b), and first run
  the __init__ of every package above it that A is not itself inside;
- the lazy registries (multinode.clouds.MODULES, components.clouds.REGISTRY) load their modules by
  name through importlib: every module name they list counts as an import of the registry.
"""
from __future__ import annotations

import ast
from pathlib import Path

from .conftest import ROOT

PACKAGES = ("multinode", "components", "policy")
REGISTRIES = ("multinode.clouds", "components.clouds")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _targets(importer: str, is_package: bool, node: ast.AST, mods: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        assert isinstance(node, ast.ImportFrom)
        if node.level:
            base = importer.split(".") if is_package else importer.split(".")[:-1]
            if node.level > 1:
                base = base[:len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        names = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in mods else prefix for a in node.names]
    out = []
    for name in names:
        parts = name.split(".")
        while parts:
            dep = ".".join(parts)
            if dep in mods and not (importer + ".").startswith(dep + "."):
                out.append(dep)
            parts.pop()
    return out


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        deps: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                deps.update(_targets(name, path.name == "__init__.py", node, mods))
            if name in REGISTRIES and isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and node.value in mods:
                deps.add(node.value)
        deps.discard(name)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_function_level_imports_and_registries_are_edges():
    graph = import_graph()
    assert "multinode.clouds.gcp" in graph["multinode.clouds"]        # listed in the lazy registry
    assert "components.clouds.aws" in graph["components.clouds"]
    assert "policy.pack" in graph["multinode.plan"]                    # imported inside run_policies()


def test_no_import_cycles_in_multinode_components_policy():
    assert cycles(import_graph()) == []
