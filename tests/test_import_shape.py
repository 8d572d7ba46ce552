"""The shape of services/ as a rule: no service package imports another
service's package, services/common imports no service, no module
imports itself back through others (no import cycle), and no gateway
module grows to GATEWAY_MODULE_MAX_LINES (the gateway-shape issue's bound:
a module that long does more than one job). The CLI may import
what it launches."""
from __future__ import annotations

import pytest

import ast
from pathlib import Path

pytestmark = pytest.mark.unit

SERVICES_DIR = Path(__file__).resolve().parents[1] / "services"
GATEWAY_MODULE_MAX_LINES = 300
SERVICES = {"gateway", "expander", "retriever_pg", "retriever_graph", "fuser", "reranker", "judge"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in SERVICES_DIR.rglob("*.py"):
        name = ".".join(path.relative_to(SERVICES_DIR.parent).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _imports(path: Path, known: set[str]) -> set[str]:
    """Project modules ``path`` imports (function-level imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found & known


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, set(modules)) for name, path in modules.items()}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_service_imports_another_service_and_common_imports_none():
    bad = []
    for module, targets in _graph().items():
        own = _package(module)
        for target in targets:
            other = _package(target)
            if other in SERVICES and other != own and (own in SERVICES or own == "common"):
                bad.append(f"{module} -> {target}")
    assert bad == []


def test_no_import_cycle():
    graph = _graph()
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    cycles = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, path + [target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_every_gateway_module_is_shorter_than_the_bound():
    lengths = {name: len(path.read_text(encoding="utf-8").splitlines())
               for name, path in _modules().items() if _package(name) == "gateway"}
    assert lengths and {name: n for name, n in lengths.items() if n >= GATEWAY_MODULE_MAX_LINES} == {}
