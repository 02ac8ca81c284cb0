"""PageRank (damping 0.85) of a random directed graph of n nodes and about 8n edges.

Each library iterates x <- alpha P x + teleport until the L1 change of an
iteration falls below its tolerance; the map contracts by alpha in L1, so the
vector is then within alpha / (1 - alpha) times that change of the exact one.
networkx computes in float64 and stops at an L1 change below n * 1e-12. cuGraph
computes an unweighted graph's ranks in float32 (the type of the edge weights it
makes up for one) and stops at an L1 change of the whole vector below its
tolerance: 1e-5, the smallest its documentation calls usable, since float32
roundoff keeps the change from falling much further. Its rounding moves the
fixed point as well: each iteration rounds every rank and a sum of at most
IN_DEGREE_BOUND in-edge terms into it, relative error (d + 2) u with u = 2^-24,
at most (IN_DEGREE_BOUND + 2) u in L1 over ranks summing to 1, amplified by
1 / (1 - alpha). The check allows the sum of these, as the L1 distance to
networkx's vector.
"""

from __future__ import annotations

import numpy as np

from accelbench.datasci import graph_error, graph_workload

DAMPING = 0.85
NETWORKX_TOLERANCE = 1e-12  # per node: networkx stops at an L1 change below n times this
CUGRAPH_TOLERANCE = 1e-5  # the whole vector's L1 change
MAX_ITERATIONS = 1000
# The random graph's in-degree is 1 + Binomial(7n, 1/n), mean 8: above 64 with a
# probability below 1e-30 per node.
IN_DEGREE_BOUND = 64
FLOAT32_ROUNDOFF = float(np.finfo(np.float32).eps) / 2


def on_networkx(nx, graph) -> np.ndarray:
    ranks = nx.pagerank(graph, alpha=DAMPING, max_iter=MAX_ITERATIONS, tol=NETWORKX_TOLERANCE)
    return np.array([ranks[node] for node in range(graph.number_of_nodes())])


def on_cugraph(cugraph, graph):
    return cugraph.pagerank(graph, alpha=DAMPING, max_iter=MAX_ITERATIONS, tol=CUGRAPH_TOLERANCE)


def tolerance(n: int) -> float:
    """L1 bound: both solvers' stopping error, and cuGraph's float32 rounding."""
    contraction = DAMPING / (1 - DAMPING)
    stopping = contraction * (n * NETWORKX_TOLERANCE + CUGRAPH_TOLERANCE)
    rounding = (IN_DEGREE_BOUND + 2) * FLOAT32_ROUNDOFF / (1 - DAMPING)
    return stopping + rounding


SPEC = graph_workload(
    "pagerank",
    "PageRank of a random directed graph of n nodes, 8n edges",
    on_networkx,
    on_cugraph,
    error=graph_error("pagerank", lambda found, wanted: np.sum(np.abs(found - wanted))),
    tolerance=tolerance,
    error_measure="L1 distance between the PageRank vectors",
)
