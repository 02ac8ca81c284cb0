"""GPU data science workloads: one module per workload, each declaring a `SPEC`.

A workload is the kernel idea one level up: a dataframe operation (pandas on
the CPU, cuDF on the GPU), a classical ML fit (scikit-learn, cuML) or a graph
algorithm (networkx, cuGraph). It declares how to make its input from a seed
and a size n (rows, samples or nodes), its code per library, the CPU
library's result as the reference, and the check with its stated tolerance.

The code of a workload is written once against the library it is given: cuDF
mirrors pandas' API and cuML scikit-learn's, so the GPU code path runs in
tests with the CPU library standing in (`Library.stand_in`), as NumPy stands
in for CuPy in the kernels. Preparing moves the inputs to the device, so the
timed `run` holds no transfer; `upload` and `download` are timed apart.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from accelbench import registry
from accelbench.backends.prepared import Prepared
from accelbench.measuring.checking import relative_error
from accelbench.platform.devices import Device

# What `fetch` returns after `poison` when `run` left no result: every check fails on it.
POISONED = None


@dataclass(frozen=True)
class Library:
    """How workload code reaches one library on its device.

    `api` is what the code calls (the pandas or cuDF module; a namespace of the
    scikit-learn or cuML estimators; networkx or cuGraph), `to_device` turns a
    host input into the library's resident one and `to_host` a result into
    NumPy or pandas. `on_device` libraries get their transfers timed apart.
    """

    name: str
    api: Any
    to_device: Callable[[Any], Any]
    to_host: Callable[[Any], Any]
    on_device: bool = False
    sync: Callable[[], object] = lambda: None

    def stand_in(self, name: str) -> Library:
        """This (CPU) library playing the device library `name`: its transfers are copies,
        so the GPU code path, transfers included, runs without a GPU."""
        return replace(self, name=name, on_device=True)


Compute = Callable[[Any, tuple[Any, ...]], Any]  # (library api, resident inputs) -> result
Prepare = Callable[[Any, Device], Prepared]  # (host inputs, device) -> Prepared


@dataclass(frozen=True)
class WorkloadSpec:
    """One workload: its input, its code per backend, its reference and check."""

    name: str
    description: str
    item: str  # what n counts: rows, samples or nodes
    make_inputs: Callable[[np.random.Generator, int], tuple[Any, ...]]
    reference: Callable[..., Any]  # the CPU library's result on the host inputs
    error: Callable[[Any, Any], float]  # result, reference -> error (inf if unusable)
    tolerance: Callable[[int], float]  # bound on `error` for size n
    error_measure: str
    reference_name: str  # the library the reference comes from
    implementations: dict[str, Prepare] = field(default_factory=dict)
    # Units of work for the throughput: n items (rows, samples or nodes) by default.
    work: Callable[[int], float] = float


# One unit for every workload's throughput, metric `item_throughput` (a metric keeps its
# unit across records); what an item is, the record says in its parameter `item`.
THROUGHPUT_UNIT = "items/s"


def workloads() -> dict[str, WorkloadSpec]:
    """All registered workloads by name: the package's, the user's (accelbench.registry)."""
    return registry.specs("datasci")


def library_prepared(library: Library, host_inputs: tuple[Any, ...], compute: Compute) -> Prepared:
    """Prepared for workload code: inputs resident in the library, `run` computes on them.

    On a device library `upload` copies the host inputs in again (replacing the
    resident ones) and `download` copies the last result out, so that transfer
    and end-to-end times can be measured like a kernel's.
    """
    resident = [library.to_device(value) for value in host_inputs]
    held: dict[str, Any] = {}

    def run():
        held["result"] = compute(library.api, *resident)
        library.sync()

    def fetch():
        result = held.get("result", POISONED)
        return POISONED if result is POISONED else library.to_host(result)

    def poison():
        held.pop("result", None)

    upload = download = None
    if library.on_device:

        def upload():
            resident[:] = [library.to_device(value) for value in host_inputs]
            library.sync()

        def download():
            return fetch()

    return Prepared(run=run, fetch=fetch, poison=poison, upload=upload, download=download)


def implementations(*backends: tuple[str, Callable[[], Library], Compute]) -> dict[str, Prepare]:
    """Backends from (name, library maker, code) triples: a CPU and a GPU library, usually
    with the same code (cuDF mirrors pandas, cuML scikit-learn).

    The maker runs only when the backend is prepared, so a missing GPU library
    costs nothing until asked for. Each wrapper carries the code's module, which
    a record names as the code that measured it.
    """

    def backend(make_library: Callable[[], Library], compute: Compute) -> Prepare:
        def prepare(inputs, device: Device) -> Prepared:
            return library_prepared(make_library(), inputs, compute)

        prepare.__module__ = compute.__module__
        return prepare

    return {name: backend(make, compute) for name, make, compute in backends}


# ---- the libraries ------------------------------------------------------------------


@dataclass(frozen=True)
class StoredFrame:
    """A frame written to a Parquet file in a folder of its own, removed with this object
    (or at exit): the input of a workload that reads files, which stays where it is."""

    folder: tempfile.TemporaryDirectory
    path: str


def _resident_frame(to_device: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A library's `to_device` for frames; a stored file is read where it lies."""
    return lambda value: value if isinstance(value, StoredFrame) else to_device(value)


def pandas_library() -> Library:
    import pandas

    copy = _resident_frame(lambda frame: frame.copy())
    return Library("pandas", pandas, copy, lambda result: result)


def polars_library() -> Library:
    """polars on the CPU, its inputs converted from pandas before timing (Arrow memory) and
    its results back to pandas for the check."""
    import polars

    return Library(
        "polars",
        polars,
        _resident_frame(polars.from_pandas),
        lambda result: result.to_pandas(),
    )


def cudf_library() -> Library:
    import cudf
    import cupy

    return Library(
        "cudf",
        cudf,
        _resident_frame(cudf.DataFrame.from_pandas),
        lambda result: result.to_pandas(),
        on_device=True,
        sync=cupy.cuda.runtime.deviceSynchronize,
    )


@dataclass(frozen=True)
class Estimators:
    """The estimators the ML workloads use, under their scikit-learn names."""

    KMeans: Any
    PCA: Any
    LinearRegression: Any
    LogisticRegression: Any
    NearestNeighbors: Any
    RandomForestClassifier: Any


def _host_arrays(result: dict[str, Any], asnumpy: Callable[[Any], np.ndarray]) -> dict[str, Any]:
    """A fit's results as float64 vectors (a scalar such as the inertia as one element)."""
    return {
        key: np.atleast_1d(np.asarray(asnumpy(value), dtype=np.float64))
        for key, value in result.items()
    }


def sklearn_library() -> Library:
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.neighbors import NearestNeighbors

    api = Estimators(
        KMeans, PCA, LinearRegression, LogisticRegression, NearestNeighbors, RandomForestClassifier
    )
    return Library("sklearn", api, np.array, lambda result: _host_arrays(result, np.asarray))


def cuml_library() -> Library:
    import cuml
    import cupy

    api = Estimators(
        cuml.KMeans,
        cuml.PCA,
        cuml.LinearRegression,
        cuml.LogisticRegression,
        cuml.neighbors.NearestNeighbors,
        cuml.ensemble.RandomForestClassifier,
    )

    def asnumpy(value):
        return cupy.asnumpy(value) if isinstance(value, cupy.ndarray) else np.asarray(value)

    return Library(
        "cuml",
        api,
        cupy.asarray,
        lambda result: _host_arrays(result, asnumpy),
        on_device=True,
        sync=cupy.cuda.runtime.deviceSynchronize,
    )


# ---- checks -------------------------------------------------------------------------


def frame_difference(result, reference) -> float:
    """0 for equal frames; for float columns the largest normwise relative error; inf where
    the columns, the length or any other column's values differ, or nothing was computed."""
    if result is POISONED or list(result.columns) != list(reference.columns):
        return math.inf
    if len(result) != len(reference):
        return math.inf
    worst = 0.0
    for column in reference.columns:
        found, wanted = np.asarray(result[column]), np.asarray(reference[column])
        if wanted.dtype.kind == "f":
            worst = max(worst, relative_error(found.astype(np.float64), wanted))
        elif not np.array_equal(found, wanted):
            return math.inf
    return worst


def frame_error(by: str | None = None) -> Callable[[Any, Any], float]:
    """frame_difference after putting the rows in the order of column `by` (for operations
    whose row order is unspecified) and the columns in the reference's dtypes (cuDF may
    count in int32 where pandas counts in int64)."""

    def error(result, reference) -> float:
        if result is POISONED:
            return math.inf
        if by is not None:
            result = result.sort_values(by, kind="stable")
            reference = reference.sort_values(by, kind="stable")
        try:
            result = result.astype(reference.dtypes.to_dict())
        except (KeyError, TypeError, ValueError):
            return math.inf
        return frame_difference(result, reference)

    return error


def vector_error(key: str) -> Callable[[Any, Any], float]:
    """Normwise relative error of the result's `key` vector against the reference's."""

    def error(result, reference) -> float:
        if result is POISONED:
            return math.inf
        return relative_error(np.asarray(result[key], np.float64), reference[key])

    return error


# ---- graphs ---------------------------------------------------------------------------


@dataclass(frozen=True)
class EdgeList:
    """A directed graph on nodes 0..nodes-1 as source and destination arrays."""

    nodes: int
    source: np.ndarray
    target: np.ndarray


def random_graph(rng: np.random.Generator, nodes: int, degree: int = 8) -> EdgeList:
    """A ring (every node reachable from 0, none dangling) plus random edges, `degree`
    per node in all; no self loops and no repeated edges, so that every library
    reads the same simple graph."""
    ring = np.arange(nodes, dtype=np.int64)
    source = np.concatenate([ring, rng.integers(0, nodes, (degree - 1) * nodes)])
    target = np.concatenate([(ring + 1) % nodes, rng.integers(0, nodes, (degree - 1) * nodes)])
    keep = source != target
    pairs = np.unique(np.stack([source[keep], target[keep]], axis=1), axis=0)
    return EdgeList(nodes, pairs[:, 0].copy(), pairs[:, 1].copy())


def networkx_graph(edges: EdgeList):
    import networkx

    graph = networkx.DiGraph()
    graph.add_nodes_from(range(edges.nodes))
    graph.add_edges_from(zip(edges.source.tolist(), edges.target.tolist(), strict=True))
    return graph


def networkx_library() -> Library:
    import networkx

    return Library("networkx", networkx, networkx_graph, lambda result: result)


def cugraph_library() -> Library:
    """cuGraph on a graph built from the edge list copied to the device (the build, a
    renumbering on the GPU, counts as moving the input to the device)."""
    import cudf
    import cugraph
    import cupy

    def to_device(edges: EdgeList):
        frame = cudf.DataFrame({"src": edges.source, "dst": edges.target})
        graph = cugraph.Graph(directed=True)
        graph.from_cudf_edgelist(frame, source="src", destination="dst")
        return graph

    return Library(
        "cugraph",
        cugraph,
        to_device,
        lambda result: result.to_pandas(),
        on_device=True,
        sync=cupy.cuda.runtime.deviceSynchronize,
    )


def vertex_values(frame, column: str, nodes: int, missing: float = np.nan) -> np.ndarray:
    """A per-vertex column of a cuGraph result (vertex, value) as a vector indexed by node."""
    values = np.full(nodes, missing, dtype=np.float64)
    values[np.asarray(frame["vertex"], dtype=np.int64)] = np.asarray(frame[column], np.float64)
    return values


# ---- one constructor per kind ---------------------------------------------------------

IDENTICAL = "identical to pandas (0: equal; inf: any value differs)"
Tolerance = float | Callable[[int], float]


@dataclass(frozen=True)
class Kind:
    """A kind of workload: what n counts and the CPU and GPU libraries, (backend, maker)."""

    item: str
    reference_name: str
    cpu: tuple[str, Callable[[], Library]]
    gpu: tuple[str, Callable[[], Library]]

    def spec(
        self,
        name: str,
        description: str,
        make_inputs: Callable,
        reference: Callable[..., Any],
        code: tuple[Compute, Compute],
        check: tuple[Callable[[Any, Any], float], Tolerance, str],
        more: tuple[tuple[str, Callable[[], Library], Compute], ...] = (),
    ) -> WorkloadSpec:
        """The workload, its CPU and GPU `code`, its `check` (error, tolerance, measure) and
        `more` backends as (name, library maker, code)."""
        error, tolerance, error_measure = check
        return WorkloadSpec(
            name=name,
            description=description,
            item=self.item,
            make_inputs=make_inputs,
            reference=reference,
            error=error,
            tolerance=tolerance if callable(tolerance) else lambda n: tolerance,
            error_measure=error_measure,
            reference_name=self.reference_name,
            implementations=implementations((*self.cpu, code[0]), (*self.gpu, code[1]), *more),
        )


DATAFRAMES = Kind("rows", "pandas", ("pandas", pandas_library), ("cudf", cudf_library))
CLASSICAL_ML = Kind("samples", "scikit-learn", ("sklearn", sklearn_library), ("cuml", cuml_library))
GRAPHS = Kind("nodes", "networkx", ("networkx", networkx_library), ("cugraph", cugraph_library))


def dataframe_workload(
    name: str,
    description: str,
    make_inputs: Callable,
    compute: Compute,
    *,
    on_polars: Compute,
    error: Callable[[Any, Any], float] | None = None,
    tolerance: Tolerance = 0.0,
    error_measure: str = IDENTICAL,
) -> WorkloadSpec:
    """A dataframe workload: `compute(df, *frames)` on pandas and on cuDF, pandas the
    reference, and `on_polars(pl, *frames)` in polars' own API."""

    def reference(*frames):
        return compute(pandas_library().api, *frames)

    check = (error or frame_error(), tolerance, error_measure)
    polars = (("polars", polars_library, on_polars),)
    return DATAFRAMES.spec(
        name, description, make_inputs, reference, (compute, compute), check, more=polars
    )


def ml_workload(
    name: str,
    description: str,
    make_inputs: Callable,
    compute: Compute,
    *,
    error: Callable[[Any, Any], float],
    tolerance: Tolerance,
    error_measure: str,
) -> WorkloadSpec:
    """A classical ML workload: `compute(estimators, *arrays)` returns a dict of arrays, on
    scikit-learn and on cuML, scikit-learn the reference."""

    def reference(*arrays):
        library = sklearn_library()
        return library.to_host(compute(library.api, *arrays))

    check = (error, tolerance, error_measure)
    return CLASSICAL_ML.spec(name, description, make_inputs, reference, (compute, compute), check)


def graph_workload(
    name: str,
    description: str,
    on_networkx: Compute,
    on_cugraph: Compute,
    *,
    error: Callable[[Any, Any], float],
    tolerance: Tolerance,
    error_measure: str,
) -> WorkloadSpec:
    """A graph workload on `random_graph(n)`: `on_networkx(nx, graph)` returns a vector per
    node, `on_cugraph(cugraph, graph)` cuGraph's frame of it; networkx the reference."""

    def make_inputs(rng: np.random.Generator, n: int) -> tuple[EdgeList]:
        return (random_graph(rng, n),)

    def reference(edges: EdgeList):
        return on_networkx(networkx_library().api, networkx_graph(edges))

    check = (error, tolerance, error_measure)
    return GRAPHS.spec(name, description, make_inputs, reference, (on_networkx, on_cugraph), check)


def coefficient_error(result, reference) -> float:
    """Normwise relative error of the coefficients and intercept together."""
    if result is POISONED:
        return math.inf

    def joined(found):
        return {"coefficients": np.append(found["coefficients"], found["intercept"])}

    return vector_error("coefficients")(joined(result), joined(reference))


def graph_error(column: str, measure: Callable[[np.ndarray, np.ndarray], float]):
    """`measure(result, reference)` of per-node vectors; a cuGraph frame is read by vertex,
    its unreached vertices (the largest int32) as -1, like networkx's."""

    def error(result, reference: np.ndarray) -> float:
        if result is POISONED:
            return math.inf
        if not isinstance(result, np.ndarray):
            result = vertex_values(result, column, len(reference))
            result[result > len(reference)] = -1.0
        if result.shape != reference.shape:
            return math.inf
        found = float(measure(result, reference))
        return found if math.isfinite(found) else math.inf

    return error
