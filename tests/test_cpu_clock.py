"""What a CPU record keeps of its CPUs' clocks and governors (host_cpus.ClockWatch), of the
BLAS loaded and of the Python that measured it: from planted sysfs trees, and from this
machine for real, whose virtual CPUs may have no cpufreq at all."""

from __future__ import annotations

import json
import os

import jsonschema
import pytest

from accelbench.families.kernel import KernelExperiment, KernelSettings
from accelbench.job import measurement
from accelbench.job.context import JobContext
from accelbench.measuring.statistics import summarize
from accelbench.platform import host_cpus
from accelbench.platform import provenance as provenance_module
from accelbench.records import record
from accelbench.records.record import RecordError, load_record, make_record

from conftest import REPO_ROOT
from records import provenance

SETTINGS = KernelSettings(min_run_time=0.02, samples=3, runs=2)
CONTEXT = JobContext("test")
CPUINFO = """\
processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8480+
cpu MHz\t\t: 2000.000

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
cpu MHz\t\t: 3800.125
"""


def cpufreq(root, cpu: int, khz: int | None, governor: str | None) -> None:
    folder = root / "cpu" / f"cpu{cpu}" / "cpufreq"
    folder.mkdir(parents=True, exist_ok=True)
    if khz is not None:
        (folder / "scaling_cur_freq").write_text(f"{khz}\n")
    if governor is not None:
        (folder / "scaling_governor").write_text(f"{governor}\n")


def test_the_clocks_of_the_cpus_the_runs_used_are_read_after_each_run(tmp_path):
    for cpu, khz in ((0, 3_700_000), (1, 3_800_000), (2, 800_000)):
        cpufreq(tmp_path, cpu, khz, "performance")
    watch = host_cpus.ClockWatch([0, 1], root=tmp_path, cpuinfo=tmp_path / "none")
    watch.poll()
    cpufreq(tmp_path, 1, 3_600_000, "performance")
    watch.poll()
    assert watch.record() == {
        "cpus": [0, 1],
        "mhz": {"min": 3600.0, "median": 3700.0, "max": 3800.0, "samples": 4},
        "sources": ["cpufreq"],
        "governors": ["performance"],
        "unreadable": {},
    }


def test_cpus_under_different_governors_name_each(tmp_path):
    cpufreq(tmp_path, 0, 3_700_000, "performance")
    cpufreq(tmp_path, 1, 1_200_000, "powersave")
    watch = host_cpus.ClockWatch([0, 1], root=tmp_path)
    watch.poll()
    assert watch.record()["governors"] == ["performance", "powersave"]


def test_a_vm_without_cpufreq_reads_cpuinfo_and_says_why_it_has_no_governor(tmp_path):
    (tmp_path / "cpuinfo").write_text(CPUINFO)
    watch = host_cpus.ClockWatch([1], root=tmp_path / "sys", cpuinfo=tmp_path / "cpuinfo")
    watch.poll()
    found = watch.record()
    assert found["mhz"] == {"min": 3800.125, "median": 3800.125, "max": 3800.125, "samples": 1}
    assert found["sources"] == ["cpuinfo"] and found["governors"] is None
    assert found["unreadable"] == {
        "governors": f"no {tmp_path}/sys/cpu/cpu1/cpufreq/scaling_governor: no cpufreq driver "
        "here (usual in a virtual machine)"
    }


def test_a_machine_that_tells_no_clock_says_so(tmp_path):
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nBogoMIPS\t: 50.00\n")
    watch = host_cpus.ClockWatch([0, 1], root=tmp_path, cpuinfo=tmp_path / "cpuinfo")
    watch.poll()
    found = watch.record()
    assert found["mhz"] is None and found["sources"] == []
    assert "for each of CPUs 0-1" in found["unreadable"]["mhz"]


def test_this_machine_tells_its_clocks_or_why_not():
    cpus = sorted(os.sched_getaffinity(0))
    watch = host_cpus.ClockWatch(cpus)
    watch.poll()
    found = watch.record()
    assert found["cpus"] == cpus
    if found["mhz"] is None:
        assert found["unreadable"]["mhz"]
    else:
        assert found["mhz"]["samples"] == len(cpus) and found["mhz"]["min"] > 0
    if found["governors"] is None:
        assert "scaling_governor" in found["unreadable"]["governors"]
    else:
        assert "governors" not in found["unreadable"]


def test_a_kernel_record_keeps_its_cpus_clocks_its_blas_and_its_python_build(tmp_path):
    exp = KernelExperiment("matmul", "cpu1", "numpy", "float64", 64)
    output = tmp_path / "matmul.json"
    assert (
        measurement.run(exp, SETTINGS, str(output), context=CONTEXT, fresh_processes=True) == "ok"
    )
    record = load_record(output)
    clock = record["conditions"]["cpu_clock"]
    assert clock["cpus"] == record["conditions"]["cpus_used"]
    # Read after each of the two runs, from one source or the other.
    assert clock["mhz"] is None or clock["mhz"]["samples"] == 2 * len(clock["cpus"])
    assert {"cpu_mhz", "governor"} <= set(record["conditions"])  # kept beside it
    assert "gpu_state" not in record["conditions"]
    built = record["provenance"]["python_build"]
    assert built["implementation"] == "CPython" and built["executable"]
    assert isinstance(built["libpython_loaded"], bool)  # Linux tells it
    blas = record["provenance"]["blas"]
    assert blas, "NumPy's BLAS is loaded in the process that wrote the record"
    assert {"openblas", "mkl", "blis"} & {library["internal_api"] for library in blas}


def kernel_record(provenance_section=None, conditions=None):
    return make_record(
        experiment="kernel",
        experiment_id="kernels/saxpy/cpu1/numpy/float64/n1000",
        status="ok",
        params={"kernel": "saxpy", "device": "cpu1", "backend": "numpy", "dtype": "float64"}
        | {"size": 1000},
        metrics={"time": summarize([1.0], "s")},
        provenance=provenance_section or provenance(),
        conditions={"busy": False, **(conditions or {})},
    )


def test_records_written_before_the_clocks_blas_and_python_build_stay_valid():
    record = kernel_record(conditions={"cpu_mhz": 2445.4, "governor": None})
    assert "python_build" not in record["provenance"] and "cpu_clock" not in record["conditions"]


def test_the_schema_refuses_clocks_blas_and_python_builds_of_the_wrong_shape():
    clock = {
        "cpus": [0],
        "mhz": {"min": 2000.0, "median": 2000.0, "max": 2000.0, "samples": 1},
        "sources": ["cpuinfo"],
        "governors": None,
        "unreadable": {"governors": "no cpufreq"},
    }
    built = {
        **dict.fromkeys(provenance_module.PYTHON_BUILD_TEXTS, None),
        **dict.fromkeys(provenance_module.PYTHON_BUILD_FLAGS, None),
    }
    blas = {"internal_api": "openblas", "num_threads": 4}
    kernel_record(provenance() | {"python_build": built, "blas": [blas]}, {"cpu_clock": clock})
    for provenance_part, conditions, message in [
        ({}, {"cpu_clock": {**clock, "governors": "performance"}}, "governors"),
        ({}, {"cpu_clock": {**clock, "sources": ["bios"]}}, "bios"),
        ({}, {"cpu_clock": {**clock, "mhz": {"min": 2000.0}}}, "median"),
        ({}, {"cpu_clock": {**clock, "turbo": True}}, "turbo"),
        ({"python_build": {**built, "libpython_loaded": "yes"}}, {}, "libpython_loaded"),
        ({"python_build": {**built, "pgo": True}}, {}, "pgo"),
        ({"blas": [{**blas, "num_threads": 0}]}, {}, "num_threads"),
        ({"blas": [{"version": "0.3.30"}]}, {}, "internal_api"),
    ]:
        with pytest.raises(RecordError, match=message):
            kernel_record(provenance() | provenance_part, conditions)


def test_the_published_schema_takes_a_record_with_its_clocks_blas_and_python_build(tmp_path):
    exp = KernelExperiment("saxpy", "cpu1", "numpy", "float64", 1000)
    output = tmp_path / "saxpy.json"
    assert measurement.run(exp, SETTINGS, str(output), context=CONTEXT) == "ok"
    published = json.loads((REPO_ROOT / record.SCHEMA_FILE).read_text(encoding="utf-8"))
    errors = jsonschema.Draft202012Validator(published).iter_errors(load_record(output))
    assert [error.message for error in errors] == []
