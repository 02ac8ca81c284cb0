"""Breadth-first search from node 0 of a random directed graph of n nodes, 8n edges.

The hop distance of every node is unique, so it must equal networkx's exactly
(the predecessors may differ between equally short paths and are not compared).
"""

from __future__ import annotations

import numpy as np

from accelbench.datasci import graph_error, graph_workload

SOURCE = 0


def on_networkx(nx, graph) -> np.ndarray:
    hops = nx.single_source_shortest_path_length(graph, SOURCE)
    distances = np.full(graph.number_of_nodes(), -1.0)
    distances[list(hops)] = list(hops.values())
    return distances


def on_cugraph(cugraph, graph):
    return cugraph.bfs(graph, start=SOURCE)


SPEC = graph_workload(
    "bfs",
    "breadth-first search from node 0 of a random graph of n nodes, 8n edges",
    on_networkx,
    on_cugraph,
    error=graph_error("distance", lambda found, wanted: np.mean(found != wanted)),
    tolerance=0.0,
    error_measure="fraction of nodes whose hop distance differs from networkx's",
)
