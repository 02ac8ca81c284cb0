"""PageRank (damping 0.85) of a random directed graph of n nodes and about 8n edges.

Both libraries iterate until the L1 change per node is below 1e-12, which puts
each within n * 1e-12 (L1) of the exact vector; the check allows twice that,
plus 1e-12 for the summation, as the L1 distance to networkx's vector.
"""

from __future__ import annotations

import numpy as np

from accelbench.datasci import graph_error, graph_workload

DAMPING = 0.85
SOLVER_TOLERANCE = 1e-12
MAX_ITERATIONS = 1000


def on_networkx(nx, graph) -> np.ndarray:
    ranks = nx.pagerank(graph, alpha=DAMPING, max_iter=MAX_ITERATIONS, tol=SOLVER_TOLERANCE)
    return np.array([ranks[node] for node in range(graph.number_of_nodes())])


def on_cugraph(cugraph, graph):
    return cugraph.pagerank(graph, alpha=DAMPING, max_iter=MAX_ITERATIONS, tol=SOLVER_TOLERANCE)


SPEC = graph_workload(
    "pagerank",
    "PageRank of a random directed graph of n nodes, 8n edges",
    on_networkx,
    on_cugraph,
    error=graph_error("pagerank", lambda found, wanted: np.sum(np.abs(found - wanted))),
    tolerance=lambda n: 2 * n * SOLVER_TOLERANCE + 1e-12,
    error_measure="L1 distance between the PageRank vectors",
)
