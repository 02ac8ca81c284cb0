"""Breadth-first search from node 0 of a random directed graph of n nodes, 8n edges.

The hop distance of every node is unique, so it must equal networkx's exactly
(the predecessors may differ between equally short paths and are not compared).
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

SOURCE = 0


def make_inputs(rng: np.random.Generator, n: int) -> tuple[EdgeList]:
    return (random_graph(rng, n),)


def on_networkx(nx, graph) -> np.ndarray:
    hops = nx.single_source_shortest_path_length(graph, SOURCE)
    distances = np.full(graph.number_of_nodes(), -1.0)
    distances[list(hops)] = list(hops.values())
    return distances


def on_cugraph(cugraph, graph):
    return cugraph.bfs(graph, start=SOURCE)


def reference(edges: EdgeList) -> np.ndarray:
    import networkx

    return on_networkx(networkx, networkx_graph(edges))


def error(result, wanted: np.ndarray) -> float:
    """The fraction of nodes whose distance differs (cuGraph marks unreached nodes with
    the largest int32; they read as -1 like networkx's)."""
    if result is None:
        return float("inf")
    if not isinstance(result, np.ndarray):
        result = vertex_values(result, "distance", len(wanted))
        result[result > len(wanted)] = -1.0
    if result.shape != wanted.shape:
        return float("inf")
    return float(np.mean(result != wanted))


SPEC = WorkloadSpec(
    name="bfs",
    description="breadth-first search from node 0 of a random graph of n nodes, 8n edges",
    item="nodes",
    make_inputs=make_inputs,
    reference=reference,
    error=error,
    tolerance=lambda n: 0.0,
    error_measure="fraction of nodes whose hop distance differs from networkx's",
    reference_name="networkx",
    implementations=implementations(
        ("networkx", networkx_library, on_networkx), ("cugraph", cugraph_library, on_cugraph)
    ),
)
