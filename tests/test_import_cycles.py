"""No import cycle among the project's modules, lazy (function-level) imports included
(markov <-> markov_store and network model <-> ns3 were cycles)."""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("lustre_alloc",)


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = path
    return mods


def import_graph() -> nx.DiGraph:
    """Module -> module it imports (anywhere in the file), project modules only."""
    mods = _modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(mods)
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            graph.add_edges_from((name, t) for t in targets if t in mods and t != name)
    return graph


def test_no_import_cycles():
    cycles = list(nx.simple_cycles(import_graph()))
    assert cycles == [], f"import cycles: {cycles}"


def test_the_checker_sees_lazy_imports():
    graph = import_graph()
    assert graph.has_edge("lustre_alloc.simulator.network.model", "lustre_alloc.simulator.network.ns3")
    assert graph.has_edge("lustre_alloc.mapper.policies.mcmf.policy", "lustre_alloc.mapper.policies.mcmf.learned_state")
    assert graph.has_edge("lustre_alloc.mapper.policies.mcmf.learned_state", "lustre_alloc.mapper.predictor.markov_store")
