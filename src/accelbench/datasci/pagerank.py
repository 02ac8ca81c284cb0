"""PageRank (damping 0.85) of a random directed graph of n nodes and about 8n edges.

Both libraries iterate until the L1 change per node is below 1e-12, which puts
each within n * 1e-12 (L1) of the exact vector; the check allows twice that,
plus 1e-12 for the summation, as the L1 distance to networkx's vector.
"""

from __future__ import annotations

import numpy as np

from accelbench.datasci import (
    EdgeList,
    WorkloadSpec,
    cugraph_library,
    implementations,
    networkx_graph,
    networkx_library,
    random_graph,
    vertex_values,
)

DAMPING = 0.85
SOLVER_TOLERANCE = 1e-12
MAX_ITERATIONS = 1000


def make_inputs(rng: np.random.Generator, n: int) -> tuple[EdgeList]:
    return (random_graph(rng, n),)


def on_networkx(nx, graph) -> np.ndarray:
    ranks = nx.pagerank(graph, alpha=DAMPING, max_iter=MAX_ITERATIONS, tol=SOLVER_TOLERANCE)
    return np.array([ranks[node] for node in range(graph.number_of_nodes())])


def on_cugraph(cugraph, graph):
    return cugraph.pagerank(graph, alpha=DAMPING, max_iter=MAX_ITERATIONS, tol=SOLVER_TOLERANCE)


def reference(edges: EdgeList) -> np.ndarray:
    import networkx

    return on_networkx(networkx, networkx_graph(edges))


def error(result, wanted: np.ndarray) -> float:
    """L1 distance between the rank vectors (a cuGraph frame is read by vertex)."""
    if result is None:
        return float("inf")
    if not isinstance(result, np.ndarray):
        result = vertex_values(result, "pagerank", len(wanted))
    if result.shape != wanted.shape:
        return float("inf")
    distance = float(np.sum(np.abs(result - wanted)))
    return distance if np.isfinite(distance) else float("inf")


SPEC = WorkloadSpec(
    name="pagerank",
    description="PageRank of a random directed graph of n nodes, 8n edges",
    item="nodes",
    make_inputs=make_inputs,
    reference=reference,
    error=error,
    tolerance=lambda n: 2 * n * SOLVER_TOLERANCE + 1e-12,
    error_measure="L1 distance between the PageRank vectors",
    reference_name="networkx",
    implementations=implementations(
        ("networkx", networkx_library, on_networkx), ("cugraph", cugraph_library, on_cugraph)
    ),
)
