"""accelbench doctor: driver, GPUs and each backend's CUDA stack, with fakes and for real here."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from accelbench import backends, doctor, experiment
from accelbench.devices import parse_device
from accelbench.grid import KernelExperiment
from accelbench.results import load_record

H100 = doctor.Gpu(0, "NVIDIA H100 80GB HBM3", 81559, "GPU-1234")


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


def test_the_driver_and_gpus_are_read_through_nvml():
    driver = doctor.driver_from_nvml(FakeNvml())
    assert (driver.version, driver.cuda, driver.source) == ("580.159.04", "13.0", "nvml")
    assert driver.gpus == [H100]


def test_nvidia_smi_is_the_fallback():
    def run(command, **_):
        line = "0, NVIDIA H100 80GB HBM3, 81559, GPU-1234, 580.159.04\n"
        return subprocess.CompletedProcess(command, 0, stdout=line, stderr="")

    driver = doctor.driver_from_nvidia_smi(run)
    assert (driver.version, driver.gpus, driver.source) == ("580.159.04", [H100], "nvidia-smi")


def fine(name):
    return lambda gpu: doctor.BackendReport(name, True, "1.0", "runtime 13.0", [], gpu or None)


def broken(gpu):
    return doctor.BackendReport(
        "cupy", True, "cupy-cuda12x 14.2.0", "", [], None,
        problem="cupy-cuda12x 14.2.0 is built for CUDA 12 but loaded NVRTC 13.0",
        fix=doctor.STACK_FIX,
    )  # fmt: skip


def test_a_gpu_with_a_broken_backend_fails_and_names_the_fix():
    driver = doctor.Driver("580.159.04", "13.0", [H100], "nvml")
    diagnosis = doctor.diagnose(driver, {"torch": fine("torch"), "cupy": broken})
    assert diagnosis.exit_code == 1
    text = doctor.render(diagnosis)
    assert "GPU 0: NVIDIA H100 80GB HBM3, 81559 MiB, GPU-1234" in text
    assert "torch: imports (1.0, runtime 13.0); test kernel: correct" in text
    assert "problem: cupy-cuda12x 14.2.0 is built for CUDA 12 but loaded NVRTC 13.0" in text
    assert "fix: install one CUDA stack: `make CUDA=13` (driver >= 580)" in text


def test_a_gpu_with_working_backends_passes():
    driver = doctor.Driver("580.159.04", "13.0", [H100], "nvml")
    diagnosis = doctor.diagnose(driver, {"torch": fine("torch"), "cupy": fine("cupy")})
    assert diagnosis.exit_code == 0
    assert doctor.render(diagnosis).endswith("Every backend can use the GPU.")


def test_without_a_gpu_a_broken_backend_is_reported_but_not_fatal():
    diagnosis = doctor.diagnose(doctor.Driver(note="no driver"), {"cupy": broken})
    assert diagnosis.exit_code == 0
    assert "No NVIDIA GPU on this machine" in doctor.render(diagnosis)


def test_the_doctor_runs_here_and_says_there_is_no_gpu():
    done = subprocess.run(
        [sys.executable, "-m", "accelbench.cli", "doctor"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No NVIDIA GPU on this machine" in done.stdout
    for name in ("torch", "cupy", "numba-cuda"):
        assert f"\n{name}: imports (" in done.stdout
    assert "libcudart.so.13" in done.stdout  # torch's CUDA 13 runtime, loaded on import


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
    monkeypatch.setattr(backends, "cuda_unavailable_reason", lambda device: None)

    def probe(gpu):
        return doctor.BackendReport(
            "torch", True, problem="PyTorch 2.14.1 sees no GPU", fix=doctor.STACK_FIX
        )

    monkeypatch.setitem(doctor.PROBES, "torch", probe)
    doctor.backend_problem.cache_clear()
    yield
    doctor.backend_problem.cache_clear()


def test_a_broken_stack_makes_gpu_experiments_unavailable_with_the_cause(
    broken_torch_on_a_gpu, tmp_path
):
    reason = backends.BACKENDS["torch"].unavailable_reason(parse_device("cuda1"))
    assert reason == f"PyTorch 2.14.1 sees no GPU; fix: {doctor.STACK_FIX}"
    exp = KernelExperiment("matmul", "cuda1", "torch", "float32", 64)
    settings = {"seed": 0, "min_run_time": 0.01, "samples": 3, "config_hash": "0"}
    assert experiment.run(exp, settings, str(tmp_path / "r.json")) == "unavailable"
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
        "from accelbench import doctor\n"
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
