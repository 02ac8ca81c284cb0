"""Data science workloads: every CPU library passes its check, a wrong or missing result
fails it, the GPU code runs with the CPU library standing in, the RAPIDS cells say why
they cannot run here, and the grid, analyses and workflow carry the family."""

from __future__ import annotations

import importlib
import json
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from accelbench import config, grid
from accelbench.analysis import crossovers, outputs, tables, tidy
from accelbench.backends.libraries import DATASCI_BACKENDS
from accelbench.datasci import (
    Library,
    library_prepared,
    networkx_graph,
    pandas_library,
    sklearn_library,
    workloads,
)
from accelbench.datasci.measure import measure_datasci
from accelbench.families import FAMILIES
from accelbench.families import datasci as datasci_family
from accelbench.families.datasci import DatasciExperiment, DatasciSettings
from accelbench.measuring.checking import check_against_reference
from accelbench.studies.roofline import offload

from conftest import snakemake
from records import datasci_records, with_energy, write_records

WORKLOADS = workloads()
REFERENCE_LIBRARIES = ("pandas", "sklearn", "networkx")
CPU_LIBRARIES = (*REFERENCE_LIBRARIES, "polars")
TINY = 300
SETTINGS = DatasciSettings(min_run_time=0.01, samples=3, runs=1)


def checked(spec, prepared, size=TINY, reference=None):
    inputs = spec.make_inputs(np.random.default_rng(0), size)
    reference = spec.reference(*inputs) if reference is None else reference
    return check_against_reference(
        prepared(inputs),
        reference,
        spec.tolerance(size),
        spec.error,
        spec.error_measure,
        spec.reference_name,
    )


def cpu_backend(spec) -> str:
    """The library the reference comes from."""
    (backend,) = [name for name in spec.implementations if name in REFERENCE_LIBRARIES]
    return backend


CPU_CELLS = [
    (name, backend)
    for name, spec in WORKLOADS.items()
    for backend in spec.implementations
    if backend in CPU_LIBRARIES
]


@pytest.mark.parametrize(("name", "backend"), CPU_CELLS)
def test_every_cpu_library_passes_its_check(name, backend):
    spec = WORKLOADS[name]
    prepare = spec.implementations[backend]
    check = checked(spec, lambda inputs: prepare(inputs, None))
    assert check["passed"], check
    assert check["reference"] == spec.reference_name


def perturbed(result):
    """The result a little wrong: a dataframe with one value changed, vectors scaled."""
    if isinstance(result, pd.DataFrame):
        wrong = result.copy()
        column = wrong.columns[-1]
        wrong.loc[wrong.index[0], column] = wrong[column].iloc[0] + 1
        return wrong
    if isinstance(result, dict):
        return {key: np.asarray(value) * 1.05 + 0.01 for key, value in result.items()}
    return np.asarray(result) * 1.05 + 0.01


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_a_wrong_or_missing_result_fails_the_check(name):
    spec = WORKLOADS[name]
    inputs = spec.make_inputs(np.random.default_rng(0), TINY)
    reference = spec.reference(*inputs)
    assert spec.error(perturbed(reference), reference) > spec.tolerance(TINY)
    # A run that computes nothing leaves the poisoned (empty) result behind.
    prepared = spec.implementations[cpu_backend(spec)](inputs, None)
    idle = SimpleNamespace(**{**prepared.__dict__, "run": lambda: None})
    check = check_against_reference(
        idle, reference, spec.tolerance(TINY), spec.error, spec.error_measure
    )
    assert not check["passed"] and check["relative_error"] == math.inf


class FailedToConvergeError(Exception):
    """cuGraph's error when PageRank stops at max_iter with fail_on_nonconvergence on."""


def float32_pagerank(graph, alpha, max_iter, tol, fail_on_nonconvergence=True):
    """cuGraph's PageRank iteration (cpp/src/link_analysis/pagerank_impl.cuh) in float32,
    the type cuGraph computes an unweighted graph's ranks in: ranks divided by out-degree,
    summed over in-edges, times alpha, plus the teleport and dangling share; it stops when
    the L1 change of the whole vector (not per vertex, as networkx) is below `tol`."""
    import networkx

    f32 = np.float32
    nodes = graph.number_of_nodes()
    incoming = networkx.to_scipy_sparse_array(graph, nodelist=range(nodes), dtype=f32).T.tocsr()
    out_degree = np.asarray(incoming.sum(axis=0), dtype=f32).ravel()
    dangling = out_degree == 0
    ranks = np.full(nodes, 1 / nodes, dtype=f32)
    for _ in range(max_iter):
        old = ranks
        unvarying = (old[dangling].sum(dtype=f32) * f32(alpha) + f32(1 - alpha)) / f32(nodes)
        ranks = (incoming @ (old / np.where(dangling, f32(1), out_degree))) * f32(alpha)
        ranks = (ranks + unvarying).astype(f32)
        if np.abs(ranks - old).sum(dtype=f32) < tol:
            break
    else:
        if fail_on_nonconvergence:
            raise FailedToConvergeError
    return pd.DataFrame({"vertex": np.arange(nodes), "pagerank": ranks})


def test_the_float32_stand_in_is_cugraphs_iteration():
    """Against networkx (float64) on a graph with a dangling vertex: float32 roundoff apart,
    and it refuses a tolerance float32 cannot reach in the iterations allowed."""
    import networkx

    graph = networkx.DiGraph([(0, 1), (1, 2), (2, 0), (2, 3), (0, 3), (3, 4)])
    ranks = float32_pagerank(graph, 0.85, 200, 1e-7)["pagerank"].to_numpy()
    assert ranks.dtype == np.float32
    exact = networkx.pagerank(graph, alpha=0.85, tol=1e-15, max_iter=1000)
    np.testing.assert_allclose(ranks, [exact[node] for node in range(5)], rtol=1e-5)
    with pytest.raises(FailedToConvergeError):
        float32_pagerank(graph, 0.85, 3, 1e-12)


def fake_cugraph() -> Library:
    """cuGraph's calls in cuGraph's shape (vertex, value frames; unreached vertices at the
    largest int32) on a networkx graph, so the GPU graph code runs without a GPU; PageRank
    in float32, as cuGraph computes it."""
    import networkx

    def bfs(graph, start):
        hops = networkx.single_source_shortest_path_length(graph, start)
        distance = [hops.get(node, 2**31 - 1) for node in graph.nodes]
        return pd.DataFrame({"vertex": list(graph.nodes), "distance": distance})

    api = SimpleNamespace(pagerank=float32_pagerank, bfs=bfs)
    return Library("cugraph", api, networkx_graph, lambda frame: frame, on_device=True)


def stand_in(spec) -> Library:
    backend = cpu_backend(spec)
    if backend == "networkx":
        return fake_cugraph()
    library = {"pandas": pandas_library, "sklearn": sklearn_library}[backend]()
    return library.stand_in({"pandas": "cudf", "sklearn": "cuml"}[backend])


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_the_gpu_code_runs_with_the_cpu_library_standing_in(name):
    spec = WORKLOADS[name]
    (gpu_code,) = [
        prepare
        for backend, prepare in spec.implementations.items()
        if "cuda" in DATASCI_BACKENDS[backend].device_kinds
    ]
    module = importlib.import_module(gpu_code.__module__)  # the code a record names
    compute = getattr(module, "compute", None) or module.on_cugraph
    library = stand_in(spec)
    inputs = spec.make_inputs(np.random.default_rng(0), TINY)
    prepared = library_prepared(library, inputs, compute)
    assert prepared.upload is not None and prepared.download is not None
    check = checked(spec, lambda _: prepared)
    assert check["passed"], check
    prepared.upload()  # the transfer the GPU backends time apart
    prepared.run()
    assert spec.error(prepared.download(), spec.reference(*inputs)) <= spec.tolerance(TINY)


@pytest.mark.parametrize("backend", ["cudf", "cuml", "cugraph"])
def test_a_rapids_library_is_unavailable_here_with_the_reason(backend):
    workload = {"cudf": "groupby", "cuml": "kmeans", "cugraph": "pagerank"}[backend]
    exp = DatasciExperiment(workload, "cuda1", backend, 1000)
    outcome = measure_datasci(exp, SETTINGS)
    assert outcome.status == "unavailable"
    assert "rapids-cuda13" in outcome.reason or "CUDA device" in outcome.reason


def test_polars_runs_on_the_devices_threads_or_says_why_not():
    import polars  # its pool is sized now (earlier tests may have imported it already)

    pool = polars.thread_pool_size()
    exp = DatasciExperiment("sort", f"cpu{pool}", "polars", 2000)
    outcome = measure_datasci(exp, SETTINGS)
    assert outcome.status == "ok", outcome.reason
    assert outcome.measured_by["implementation"] == "accelbench.datasci.sort:polars"
    # The pool cannot be resized: another thread count is refused, saying why.
    other = DatasciExperiment("sort", f"cpu{pool + 1}", "polars", 2000)
    refused = measure_datasci(other, SETTINGS)
    assert refused.status == "unavailable"
    assert f"thread pool has {pool} threads, cpu{pool + 1} needs {pool + 1}" in refused.reason


def test_a_cpu_workload_is_measured_with_time_throughput_and_its_check():
    exp = DatasciExperiment("groupby", "cpu1", "pandas", 2000)
    outcome = FAMILIES["datasci"].measuring_function()(exp, SETTINGS)
    assert outcome.status == "ok", outcome.reason
    assert outcome.check["passed"] and outcome.check["reference"] == "pandas"
    assert outcome.metrics["time"]["unit"] == "s" and outcome.metrics["time"]["median"] > 0
    assert outcome.metrics["item_throughput"]["unit"] == "items/s"
    assert "transfer_time" not in outcome.metrics  # pandas' inputs live on the host
    assert outcome.params == {"item": "rows"}
    assert outcome.measured_by["implementation"] == "accelbench.datasci.groupby:pandas"


def datasci_config(**section):
    base = config.load()
    base["datasci"] = {"overrides": {}, **section}
    return base


def test_the_grid_pairs_workloads_with_their_libraries_and_says_why_not():
    found = grid.expand(
        datasci_config(
            devices=["cpu2", "cuda1"],
            backends=["pandas", "cudf", "sklearn"],
            sizes={"groupby": [1000], "kmeans": [500]},
        )
    )
    paths = [path for path in found.paths if "/datasci/" in path]
    assert paths == [
        "results/datasci/groupby/cpu2/pandas/n1000.json",
        "results/datasci/groupby/cuda1/cudf/n1000.json",
        "results/datasci/kmeans/cpu2/sklearn/n500.json",
    ]
    reasons = {exp.path: reason for exp, reason in found.excluded if exp.family == "datasci"}
    assert (
        "runs on cpu devices, not on cuda1"
        in reasons["results/datasci/groupby/cuda1/pandas/n1000.json"]
    )
    assert "runs on cuda devices" in reasons["results/datasci/groupby/cpu2/cudf/n1000.json"]
    assert not any("/kmeans/" in path and "pandas" in path for path in reasons)


def test_a_result_path_parses_back_and_a_bad_part_is_named():
    exp = DatasciExperiment("pagerank", "cuda1", "cugraph", 10000)
    assert exp.path == "results/datasci/pagerank/cuda1/cugraph/n10000.json"
    wildcards = {"workload": "pagerank", "device": "cuda1", "backend": "cugraph", "size": "10000"}
    assert datasci_family.parse(wildcards) == exp
    assert grid.cell_of_path(exp.path)[:2] == ("datasci", exp.id)
    with pytest.raises(grid.GridError, match="workload 'pagerang' is not known; allowed: .*bfs"):
        datasci_family.parse({**wildcards, "workload": "pagerang"})
    with pytest.raises(grid.GridError, match="has no 'cudf' implementation"):
        datasci_family.parse({**wildcards, "backend": "cudf"})
    with pytest.raises(grid.GridError, match="one GPU; cuda2 asks for 2"):
        datasci_family.parse({**wildcards, "device": "cuda2"})


def test_a_bad_config_value_names_its_key_and_the_allowed_values(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("datasci: {devices: [cpu1], backends: [polar], sizes: {groupby: [10]}}\n")
    with pytest.raises(config.ConfigError, match="polar") as raised:
        config.load([bad])
    assert "cudf" in str(raised.value)
    bad.write_text("datasci: {devices: [cpu1], backends: [pandas], sizes: {grupby: [10]}}\n")
    with pytest.raises(config.ConfigError, match="datasci.sizes: unknown workload 'grupby'"):
        config.load([bad])


@pytest.fixture
def frame(tmp_path):
    found, problems = tidy.collect(write_records(tmp_path, datasci_records(["cpu2", "cuda1"])))
    assert problems == []
    return found


def test_the_table_has_a_row_per_workload_and_size_across_devices(frame, tmp_path):
    table, notes = outputs.TABLES["datasci_time"](frame, "cpu1")
    assert list(table.columns) == ["cpu2", "cuda1"]
    # Each row in the unit of its largest time, named beside it: the rows' units differ.
    assert "groupby, n=1000 (µs)" in table.index and "pagerank, n=1M (s)" in table.index
    assert table.loc["groupby, n=10M", "cuda1"].startswith("n/a")
    assert any("cpu2: networkx, pandas, sklearn" in note for note in notes)
    tables.write_table(table, notes, tmp_path / "datasci_time")
    assert (tmp_path / "datasci_time.md").read_text(encoding="utf-8").count("\n") > 10


def test_the_crossover_and_the_offload_table_include_the_workloads(frame):
    found = crossovers.crossovers(frame, with_transfer=True).set_index("workload")
    assert set(found.index) == {"groupby", "kmeans", "pagerank"}
    assert (found["experiment"] == "datasci").all()
    assert (found.loc["groupby", "crossover_low"], found.loc["groupby", "crossover_high"]) == (
        10_000,
        100_000,
    )
    assert found.loc["pagerank", "says"] == (
        "GPU ahead at all 4 sizes measured, from n=1000 to n=1M"
    )
    numbers = offload.break_even_table(frame).set_index("kernel")
    row = numbers.loc["groupby"]
    assert row["experiment"] == "datasci" and row["gpu_device"] == "cuda1"
    assert (row["crossover_low"], row["crossover_high"]) == (10_000, 100_000)
    assert row["measured"] == found.loc["groupby", "says"]
    assert math.isnan(row["break_even_intensity"])
    assert row["note"] == "no flop count: the model does not apply, the measurement only"


def test_the_crossover_figure_draws_the_workloads_in_their_own_items(frame):
    fig = crossovers.crossover_figure(frame)
    panels = {ax.get_title().split("\n")[0]: ax for ax in fig.axes if ax.get_title()}
    assert list(panels) == ["groupby", "kmeans", "pagerank"]
    assert panels["pagerank"].get_ylabel() == "GPU speedup over the CPU (×)"
    said = panels["groupby"].get_title().split("\n")[2]
    assert said.startswith("copies included: GPU overtakes between n=")
    assert panels["pagerank"].get_title().endswith("GPU ahead at all 4 sizes measured")


def test_energy_is_set_beside_time_per_call_in_a_table_and_a_figure(tmp_path):
    records = with_energy(datasci_records(["cpu2", "cuda1"]), unreadable=("cpu2",))
    found, problems = tidy.collect(write_records(tmp_path, records))
    assert problems == []
    table, notes = outputs.TABLES["datasci_energy"](found, "cpu1")
    energy = next(column for column in table.columns if column.startswith("energy per call ("))
    assert "[" in table.loc["groupby, n=1000, cuda1", energy]  # median [interval]
    assert table.loc["groupby, n=1000, cpu2", energy].startswith("n/a")  # and why, below
    assert any(note.startswith("Energy measured with nvml") for note in notes)
    fig = outputs.FIGURES["datasci_energy"](found, "cpu1", None)
    assert any(ax.get_title() for ax in fig.axes)


def test_the_figure_has_a_panel_per_workload_and_device_with_items_per_second(frame):
    fig = outputs.FIGURES["datasci_throughput"](frame, "cpu1", None)
    axes = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in axes] == [
        f"{workload}, {device}"
        for workload in ("groupby", "kmeans", "pagerank")
        for device in ("cpu2", "cuda1")
    ]
    assert [ax.get_ylabel() for ax in axes][::2] == [
        "Throughput (rows/s)",
        "Throughput (samples/s)",
        "Throughput (nodes/s)",
    ]
    assert all(ax.get_xscale() == "log" for ax in axes)  # 1000 to 1,000,000


def test_the_workflow_measures_a_data_science_cell(workflow_dir):
    (workflow_dir / "config" / "datasci.yaml").write_text(
        "datasci: {devices: [cpu1], backends: [pandas], sizes: {groupby: [1000]},"
        " min_run_time: 0.01, samples: 3, warmup_s: 0.05, runs: 3, budget_s: 0}\n"
    )
    target = "results/datasci/groupby/cpu1/pandas/n1000.json"
    done = snakemake(
        workflow_dir,
        "--cores",
        "2",
        target,
        "--configfile",
        "config/tiny.yaml",
        "config/datasci.yaml",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((workflow_dir / target).read_text())
    assert record["status"] == "ok" and record["experiment"] == "datasci"
    assert record["params"]["workload"] == "groupby" and record["check"]["passed"]
    planned = snakemake(
        workflow_dir, "-n", "--configfile", "config/tiny.yaml", "config/datasci.yaml"
    )
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "datasci_benchmark" in planned.stdout  # the default grid's cells, still to run
    assert f"output: {target}" not in planned.stdout  # measured already
