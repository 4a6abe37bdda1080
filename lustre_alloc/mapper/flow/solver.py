"""Solvers of the placement network: a maximum flow of minimum cost (Section III-C2, Eq. 1-2).

* :func:`solve_ortools`: Google OR-Tools ``SimpleMinCostFlow`` (cost scaling push-relabel),
  arcs added in bulk from the arrays. The production solver. It first asks for a flow
  that serves every request (``solve``, the usual case, about twice as fast) and only
  when that is infeasible for the maximum flow of minimum cost
  (``solve_max_flow_with_min_cost``). When every request fits the two coincide: the
  maximum flow is then the total supply.
* :func:`solve_networkx`: networkx ``network_simplex`` on a ``MultiDiGraph`` (parallel
  arcs kept), with the maximum flow value from ``maximum_flow_value`` as the demand.
  networkx is what the paper used; kept as the reference the tests compare against.

Both return a :class:`FlowSolution` whose ``flows`` follow the network's arc order.
"""
from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
from ortools.graph.python import min_cost_flow

from lustre_alloc.mapper.flow.network import SINK, SOURCE, FlowNetwork


class SolverError(RuntimeError):
    """The solver did not reach an optimum (bad cost range, internal failure)."""


@dataclass(frozen=True)
class FlowSolution:
    """A solved round: ``flows`` int64 (n_arcs,), total ``cost`` (Eq. 1), ``max_flow``."""
    flows: np.ndarray
    cost: int
    max_flow: int


def solve_ortools(net: FlowNetwork) -> FlowSolution:
    """Maximum flow of minimum cost with OR-Tools.

    Raises:
        SolverError: OR-Tools did not report OPTIMAL.
    """
    smcf = min_cost_flow.SimpleMinCostFlow()
    if net.n_arcs == 0:
        return FlowSolution(np.zeros(0, dtype=np.int64), 0, 0)
    arcs = smcf.add_arcs_with_capacity_and_unit_cost(net.tails, net.heads, net.capacities, net.costs)
    smcf.set_nodes_supplies(np.arange(net.n_nodes, dtype=np.int64), net.supplies)
    status = smcf.solve()
    if status == smcf.INFEASIBLE:
        status = smcf.solve_max_flow_with_min_cost()
    if status != smcf.OPTIMAL:
        raise SolverError(f"OR-Tools min cost flow status {status}")
    return FlowSolution(np.asarray(smcf.flows(arcs), dtype=np.int64), int(smcf.optimal_cost()),
                        int(smcf.maximum_flow()))


def solve_networkx(net: FlowNetwork) -> FlowSolution:
    """The same problem with networkx (reference; slow: a Python object per arc)."""
    if net.n_arcs == 0:
        return FlowSolution(np.zeros(0, dtype=np.int64), 0, 0)
    merged = nx.DiGraph()
    for t, h, c in zip(net.tails.tolist(), net.heads.tolist(), net.capacities.tolist()):
        if merged.has_edge(t, h):
            merged[t][h]["capacity"] += c
        else:
            merged.add_edge(t, h, capacity=c)
    if SOURCE not in merged or SINK not in merged:
        return FlowSolution(np.zeros(net.n_arcs, dtype=np.int64), 0, 0)
    flow_value = int(nx.maximum_flow_value(merged, SOURCE, SINK))
    g = nx.MultiDiGraph()
    g.add_nodes_from(range(net.n_nodes), demand=0)
    g.nodes[SOURCE]["demand"] = -flow_value
    g.nodes[SINK]["demand"] = flow_value
    for a, (t, h, c, w) in enumerate(zip(net.tails.tolist(), net.heads.tolist(),
                                          net.capacities.tolist(), net.costs.tolist())):
        g.add_edge(t, h, key=a, capacity=c, weight=w)
    cost, flow_dict = nx.network_simplex(g)
    flows = np.zeros(net.n_arcs, dtype=np.int64)
    for a, (t, h) in enumerate(zip(net.tails.tolist(), net.heads.tolist())):
        flows[a] = flow_dict[t][h][a]
    return FlowSolution(flows, int(cost), flow_value)


SOLVERS = {"ortools": solve_ortools, "networkx": solve_networkx}
