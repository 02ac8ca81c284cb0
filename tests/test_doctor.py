"""accelbench doctor: driver, GPUs and each backend's CUDA stack, with fakes and for real here."""

from __future__ import annotations

import functools
import io
import json
import os
import pickle
import subprocess
import sys

import pytest

from accelbench import backends
from accelbench.backends import libraries
from accelbench.backends import torch as torch_backend
from accelbench.backends.libraries import DATASCI_BACKENDS
from accelbench.families.kernel import KernelExperiment, KernelSettings
from accelbench.families.train import TrainExperiment
from accelbench.job import measurement
from accelbench.job.context import JobContext
from accelbench.platform import doctor
from accelbench.platform.devices import parse_device
from accelbench.platform.gpu_support import VisibleGpu
from accelbench.records.record import load_record
from accelbench.train import loop
from accelbench.train.settings import TrainSettings

from fake_torch_cuda import A100, CUDA13_ARCHS, T4, V100, FakeTorch

CONTEXT = JobContext("0")

H100 = doctor.Gpu(0, "NVIDIA H100 80GB HBM3", 81559, "GPU-1234", (9, 0))
TESLA_V100 = doctor.Gpu(0, "Tesla V100-SXM2-32GB", 32768, "GPU-7000", (7, 0))


class FakeNvml:
    """The calls of nvidia-ml-py the doctor makes, answering like a one-GPU node."""

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetMemoryInfo(self, handle):
        return type("Memory", (), {"total": 81559 * 2**20})()

    def nvmlDeviceGetUUID(self, handle):
        return "GPU-1234"

    def nvmlSystemGetDriverVersion(self):
        return "580.159.04"

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return 13000

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        return (9, 0)


def test_the_driver_and_gpus_are_read_through_nvml():
    driver = doctor.driver_from_nvml(FakeNvml())
    assert (driver.version, driver.cuda, driver.source) == ("580.159.04", "13.0", "nvml")
    assert driver.gpus == [H100]


def test_nvidia_smi_is_the_fallback():
    def run(command, **_):
        line = "0, NVIDIA H100 80GB HBM3, 81559, GPU-1234, 580.159.04, 9.0\n"
        return subprocess.CompletedProcess(command, 0, stdout=line, stderr="")

    driver = doctor.driver_from_nvidia_smi(run)
    assert (driver.version, driver.gpus, driver.source) == ("580.159.04", [H100], "nvidia-smi")


def fine(name):
    def probe(kernel_gpu):
        ran = None if kernel_gpu is None else True
        return doctor.BackendReport(
            name, True, "1.0", "runtime 13.0", [], ran, archs=list(CUDA13_ARCHS)
        )

    return probe


def broken(gpu):
    return doctor.BackendReport(
        "cupy", True, "cupy-cuda12x 14.2.0", "", [], None,
        problem="cupy-cuda12x 14.2.0 is built for CUDA 12 but loaded NVRTC 13.0",
        fix=doctor.STACK_FIX,
    )  # fmt: skip


def diagnosed(driver, probes):
    """What the doctor concludes from these probes' reports (diagnose runs them forked, after
    the imports: tests/test_cuda_fork.py checks that in a process of its own)."""
    kernel_gpu = 0 if driver.gpus else None
    return doctor.Diagnosis(driver, [probe(kernel_gpu) for probe in probes.values()], [])


def test_a_gpu_with_a_broken_backend_fails_and_names_the_fix():
    driver = doctor.Driver("580.159.04", "13.0", [H100], "nvml")
    diagnosis = diagnosed(driver, {"torch": fine("torch"), "cupy": broken})
    assert diagnosis.exit_code == 1
    text = doctor.render(diagnosis)
    assert "GPU 0: NVIDIA H100 80GB HBM3, 81559 MiB, GPU-1234, compute capability 9.0" in text
    assert "torch: imports (1.0, runtime 13.0); test kernel: correct" in text
    assert "problem: cupy-cuda12x 14.2.0 is built for CUDA 12 but loaded NVRTC 13.0" in text
    assert "fix: install one CUDA stack: `make CUDA=13` (driver >= 580)" in text


def test_a_gpu_with_working_backends_passes():
    driver = doctor.Driver("580.159.04", "13.0", [H100], "nvml")
    diagnosis = diagnosed(driver, {"torch": fine("torch"), "cupy": fine("cupy")})
    assert diagnosis.exit_code == 0
    text = doctor.render(diagnosis)
    assert "cannot run" not in text and "unavailable on it" not in text
    assert text.endswith("Every backend can use the GPU.")


def test_without_a_gpu_a_broken_backend_is_reported_but_not_fatal():
    diagnosis = diagnosed(doctor.Driver(note="no driver"), {"cupy": broken})
    assert diagnosis.exit_code == 0
    assert "No NVIDIA GPU on this machine" in doctor.render(diagnosis)


def test_a_gpu_the_stack_has_no_code_for_is_explained_with_the_stack_to_pick():
    driver = doctor.Driver("580.159.04", "13.0", [TESLA_V100], "nvml")
    diagnosis = diagnosed(driver, {"torch": fine("torch"), "cupy": fine("cupy")})
    assert diagnosis.exit_code == 1
    lines = doctor.render(diagnosis).splitlines()
    gpu = lines.index("GPU 0: Tesla V100-SXM2-32GB, 32768 MiB, GPU-7000, compute capability 7.0")
    assert lines[gpu + 1 : gpu + 4] == [
        "  cannot run: torch 1.0 has no code for compute capability 7.0 "
        "(it carries sm_75 sm_80 sm_86 sm_90 sm_100 sm_120)",
        "  cannot run: cupy 1.0 has no code for compute capability 7.0 "
        "(it carries sm_75 sm_80 sm_86 sm_90 sm_100 sm_120)",
        "  fix: install the CUDA 12 stack, which drives compute capability 7.0 "
        "(`make CUDA=12`, config cuda_stack: 12; NVIDIA driver >= 525.60.13; "
        "see docs/install.md, CUDA stacks)",
    ]
    assert lines[gpu + 4].startswith("  bf16 and tf32 experiments are unavailable on it: ")
    assert lines[-1] == "A GPU is present but a backend cannot use it (see the fixes above)."


def test_the_doctor_runs_here_and_says_there_is_no_gpu():
    # CUDA_HOME as after `module load cuda`: the imports before the fork must still leave
    # CUDA alone (torch.utils.cpp_extension asks the driver wherever it is set).
    done = subprocess.run(
        [sys.executable, "-m", "accelbench.cli", "doctor"],
        capture_output=True,
        text=True,
        env={**os.environ, "CUDA_HOME": "/usr/local/cuda"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No NVIDIA GPU on this machine" in done.stdout
    for name in ("torch", "cupy", "numba-cuda", "jax"):
        assert f"\n{name}: imports (" in done.stdout
    assert "\n  runs on: sm_75 sm_80 sm_86 sm_90 sm_100 sm_120\n" in done.stdout
    assert "libcudart.so.13" in done.stdout  # torch's CUDA 13 runtime, loaded on import
    assert "initialised CUDA" not in done.stdout


def modules_to_unpickle(data: bytes) -> set[str]:
    """The modules whose classes unpickling `data` imports."""
    modules = set()

    class Recording(pickle.Unpickler):
        def find_class(self, module, name):
            modules.add(module)
            return super().find_class(module, name)

    Recording(io.BytesIO(data)).load()
    return modules


@pytest.mark.parametrize("name", list(doctor.PROBES))
def test_a_backends_report_reads_back_without_importing_the_backend(name):
    """Reports are made in a forked child (forked_cuda.ask): reading one back must not import
    the backend into the asking process (torch's version is a class of torch's: seconds)."""
    report = doctor.inspect_backend(name, doctor.PROBES[name], None)
    assert all(
        module.startswith(("accelbench.", "builtins"))
        for module in modules_to_unpickle(pickle.dumps(report))
    )


def test_loaded_libraries_are_read_from_the_process_maps(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r-xp 0 08:01 1 /venv/nvidia/cu13/lib/libcudart.so.13\n"
        "7f01-7f02 r-xp 0 08:01 1 /venv/nvidia/cu13/lib/libcudart.so.13\n"
        "7f02-7f03 r-xp 0 08:01 2 /usr/lib/libc.so.6\n"
        "7f03-7f04 r-xp 0 08:01 3 /venv/cupy/libnvrtc.so.12\n"
    )
    assert doctor.loaded_cuda_libraries(maps) == [
        "/venv/nvidia/cu13/lib/libcudart.so.13",
        "/venv/cupy/libnvrtc.so.12",
    ]


@pytest.fixture
def broken_torch_on_a_gpu(monkeypatch):
    """A GPU the driver shows, with a torch stack that cannot use it."""
    monkeypatch.setattr(torch_backend, "cuda_unavailable_reason", lambda device: None)

    def probe(gpu):
        return doctor.BackendReport(
            "torch", True, problem="PyTorch 2.14.1 sees no GPU", fix=doctor.STACK_FIX
        )

    monkeypatch.setitem(doctor.PROBES, "torch", probe)


def test_a_broken_stack_makes_gpu_experiments_unavailable_with_the_cause(
    broken_torch_on_a_gpu, tmp_path
):
    reason = backends.named("torch").unavailable_reason(parse_device("cuda1"))
    assert reason == f"PyTorch 2.14.1 sees no GPU; fix: {doctor.STACK_FIX}"
    exp = KernelExperiment("matmul", "cuda1", "torch", "float32", 64)
    settings = KernelSettings(min_run_time=0.01, samples=3)
    assert (
        measurement.run(exp, settings, str(tmp_path / "r.json"), context=CONTEXT) == "unavailable"
    )
    assert load_record(tmp_path / "r.json")["reason"] == reason


@pytest.mark.parametrize(
    "order", [("torch", "cupy", "numba.cuda"), ("numba.cuda", "cupy", "torch"), ("cupy", "torch")]
)
def test_the_installed_stack_loads_one_cuda_major_in_any_import_order(order):
    """torch, CuPy and Numba-CUDA share one CUDA runtime and compiler, whoever imports first."""
    script = (
        "import importlib, json\n"
        f"for name in {list(order)!r}: importlib.import_module(name)\n"
        "from cupy_backends.cuda.libs import nvrtc\n"
        "from accelbench.platform import doctor\n"
        "print(json.dumps([nvrtc.getVersion()[0], doctor.loaded_cuda_libraries()]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    nvrtc_major, libraries = json.loads(done.stdout.splitlines()[-1])
    majors = {
        path.rsplit(".so.", 1)[1].split(".")[0]
        for path in libraries
        if "libcudart.so." in path or "libnvrtc.so." in path
    }
    cupy_build = doctor._distribution("cupy-cuda13x", "cupy-cuda12x")
    assert majors == {str(nvrtc_major)} == {"13" if "cuda13x" in cupy_build else "12"}


@pytest.fixture
def gpus(monkeypatch, tmp_path):
    """Install a stand-in torch with the given GPUs (fake_torch_cuda) as the doctor's torch."""

    def install(*models, archs=CUDA13_ARCHS):
        fake = FakeTorch(models, tmp_path / "launches", archs)
        monkeypatch.setitem(
            doctor.PROBES, "torch", functools.partial(doctor.probe_torch, torch=fake)
        )
        return fake

    return install


def test_a_gpu_the_stack_has_no_code_for_makes_its_experiments_unavailable(gpus, tmp_path):
    fake = gpus(V100)
    exp = KernelExperiment("matmul", "cuda1", "torch", "float32", 64)
    settings = KernelSettings(min_run_time=0.01, samples=3)
    assert (
        measurement.run(exp, settings, str(tmp_path / "r.json"), context=CONTEXT) == "unavailable"
    )
    assert load_record(tmp_path / "r.json")["reason"] == (
        "GPU 0 (Tesla V100-SXM2-32GB): torch 2.14.1+cu130 has no code for compute capability 7.0 "
        "(it carries sm_75 sm_80 sm_86 sm_90 sm_100 sm_120); fix: install the CUDA 12 stack, "
        "which drives compute capability 7.0 (`make CUDA=12`, config cuda_stack: 12; "
        "NVIDIA driver >= 525.60.13; see docs/install.md, CUDA stacks)"
    )
    assert fake.launched() == []  # never "no kernel image": the check comes first


def test_the_doctor_names_the_gpus_a_backend_sees_and_the_architectures_it_carries(gpus):
    gpus(V100, A100)
    report = doctor.probe_torch(None, torch=doctor.PROBES["torch"].keywords["torch"])
    assert report.gpus == [
        VisibleGpu(0, "Tesla V100-SXM2-32GB", (7, 0), "00000000-0000-0000-0000-000000000000"),
        VisibleGpu(1, "NVIDIA A100-SXM4-80GB", (8, 0), "00000000-0000-0000-0000-000000000001"),
    ]
    assert report.archs == list(CUDA13_ARCHS) and report.problem is None


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_a_bfloat16_kernel_before_ampere_is_unavailable_and_other_dtypes_are_not(gpus, dtype):
    gpus(T4)
    reason = backends.named("torch").unavailable_reason(parse_device("cuda1"), dtype)
    if dtype == "bfloat16":
        assert reason == (
            "GPU 0 (Tesla T4): bfloat16 needs compute capability 8.0 (Ampere) or newer; "
            "on 7.5 PyTorch emulates it, so the times would not be bfloat16's"
        )
    else:
        assert reason is None


TRAIN_SETTINGS = TrainSettings(seed=0, steps=3, warmup_steps=1, image_size=32)


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_training_in_tf32_or_bf16_before_ampere_is_unavailable(gpus, precision):
    gpus(T4)
    exp = TrainExperiment("resnet18", "cuda1", precision, "single", 4)
    outcome = loop.measure_training(exp, TRAIN_SETTINGS)
    assert outcome.status == "unavailable"
    assert outcome.reason.startswith("GPU 0 (Tesla T4): ")
    assert "compute capability 8.0 (Ampere) or newer; on 7.5" in outcome.reason


def test_a_launched_rank_checks_its_own_gpu_not_gpu_0(gpus, monkeypatch):
    """torchrun's rank 1 sees both GPUs of its node: its check runs on GPU 1 (in
    EXCLUSIVE_PROCESS mode a context on GPU 0 would keep rank 0 off it)."""
    fake = gpus(A100, T4)
    for name, value in {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    exp = TrainExperiment("resnet18", "cuda2", "tf32", "ddp", 4)
    outcome = loop.measure_training(exp, TRAIN_SETTINGS)
    assert outcome.status == "unavailable"
    assert outcome.reason.startswith("GPU 1 (Tesla T4): TF32 needs compute capability 8.0")
    assert [device for _, device in fake.launched()] == ["cuda:1"]


SIMULATOR_REFUSED = """
import json
from accelbench.platform import doctor
from accelbench.job import measurement
from accelbench.platform.devices import parse_device
from accelbench.families.kernel import KernelExperiment, KernelSettings
from accelbench.job.context import JobContext
from accelbench.records.record import load_record
exp = KernelExperiment("saxpy", "cuda1", "numba-cuda", "float32", 64)
settings = KernelSettings(min_run_time=0.01, samples=3)
measurement.run(exp, settings, "r.json", context=JobContext("0"))
print("RESULT " + json.dumps({
    "record": [load_record("r.json")[key] for key in ("status", "reason")],
    "doctor": doctor.probe_numba_cuda(None).problem,
}))
"""


def test_the_cuda_simulator_is_refused_outside_the_test_suite(tmp_path):
    """NUMBA_ENABLE_CUDASIM=1 left in a shell would record the simulator's times as GPU times."""
    env = {k: v for k, v in os.environ.items() if k != doctor.SIMULATOR_ALLOWANCE}
    done = subprocess.run(
        [sys.executable, "-c", SIMULATOR_REFUSED],
        env={**env, "NUMBA_ENABLE_CUDASIM": "1"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.split("RESULT ", 1)[1])
    refusal = (
        "NUMBA_ENABLE_CUDASIM=1 is set: Numba-CUDA would run its CUDA simulator on the CPU and "
        "its times would be recorded as GPU times; unset NUMBA_ENABLE_CUDASIM"
    )
    assert found == {"record": ["unavailable", refusal], "doctor": refusal}


def test_a_rapids_library_is_imported_only_after_the_forked_gpu_check(monkeypatch, tmp_path):
    """Importing cuDF initialises CUDA (it checks the driver and the GPUs): done before the
    check, the check's forked child could no longer use CUDA and would find no GPU."""
    order = []
    (tmp_path / "cudf.py").write_text("import order\norder.calls.append('import cudf')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "order", type(sys)("order"))
    sys.modules["order"].calls = order
    monkeypatch.setitem(sys.modules, "cudf", None)  # undone: the stand-in leaves no trace
    monkeypatch.delitem(sys.modules, "cudf")
    monkeypatch.setattr(
        libraries, "cuda_unavailable_reason", lambda device: order.append("GPU check")
    )
    reason = DATASCI_BACKENDS["cudf"].unavailable_reason(parse_device("cuda1"))
    assert reason is None
    assert order == ["GPU check", "import cudf"]


def test_a_rapids_library_that_is_not_installed_says_which_extra_installs_it():
    reason = DATASCI_BACKENDS["cugraph"].unavailable_reason(parse_device("cuda1"))
    assert reason == (
        "cuGraph is not installed (optional extra rapids-cuda13 or rapids-cuda12, as the CUDA "
        "stack; see docs/workloads.md, RAPIDS): No module named 'cugraph'"
    )
