"""`accelbench doctor`: can each GPU backend load its CUDA libraries and run a kernel here?

The three GPU stacks find their CUDA libraries in different ways: torch links
the CUDA 13 wheels it pins, CuPy and Numba-CUDA look them up at run time with
cuda-pathfinder, which takes the first major version it finds. A venv that
mixes them can import every package and still fail, or silently run CuPy's
CUDA 12 build on CUDA 13's compiler. The doctor reports, for the driver, each
GPU and each backend, what was loaded from where and whether a tiny kernel
gives the right answer, and names the fix when a GPU is present but a backend
cannot use it. The workflow asks the same backend check once per process
before any GPU experiment (`backend_problem`), so a broken stack becomes an
"unavailable" record naming the cause.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# The CUDA libraries worth naming: runtime, compiler (NVRTC, NVVM), BLAS, FFT, driver.
CUDA_LIBRARIES = ("libcuda.so", "libcudart", "libnvrtc", "libnvvm", "libcublas", "libcufft")
STACK_FIX = (
    "install one CUDA stack: `make CUDA=13` (driver >= 580) or `make CUDA=12` (driver < 580); "
    "see README, CUDA stacks"
)


@dataclass
class Gpu:
    index: int
    name: str
    memory_mib: int
    uuid: str


@dataclass
class Driver:
    """What the NVIDIA driver says: its version, the CUDA version it supports, its GPUs."""

    version: str | None = None
    cuda: str | None = None
    gpus: list[Gpu] = field(default_factory=list)
    source: str = "none"  # "nvml", "nvidia-smi" or "none"
    note: str = ""


@dataclass
class BackendReport:
    name: str
    imported: bool = False
    version: str = ""
    cuda: str = ""  # the CUDA versions the backend itself reports
    libraries: list[str] = field(default_factory=list)
    kernel_ok: bool | None = None  # None: not tried (no GPU)
    problem: str | None = None
    fix: str | None = None


def _cuda_version(number: int) -> str:
    """NVML's and the runtimes' integer CUDA version (13000) as text (13.0)."""
    return f"{number // 1000}.{number % 1000 // 10}"


def driver_from_nvml(nvml=None) -> Driver:
    """The driver and GPUs through NVML (nvidia-ml-py); Driver(source="none") if unreadable."""
    try:
        nvml = nvml or importlib.import_module("pynvml")
    except ImportError as err:
        return Driver(note=f"nvidia-ml-py is not installed ({err})")
    try:
        nvml.nvmlInit()
    except Exception as err:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        return Driver(note=f"NVML cannot start: {err}")
    try:
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            gpus.append(
                Gpu(
                    index=index,
                    name=_text(nvml.nvmlDeviceGetName(handle)),
                    memory_mib=int(nvml.nvmlDeviceGetMemoryInfo(handle).total) // 2**20,
                    uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                )
            )
        return Driver(
            version=_text(nvml.nvmlSystemGetDriverVersion()),
            cuda=_cuda_version(nvml.nvmlSystemGetCudaDriverVersion_v2()),
            gpus=gpus,
            source="nvml",
        )
    finally:
        nvml.nvmlShutdown()


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def driver_from_nvidia_smi(run: Callable[..., subprocess.CompletedProcess] = subprocess.run):
    """The same from nvidia-smi, where NVML's Python binding is missing."""
    if shutil.which("nvidia-smi") is None and run is subprocess.run:
        return Driver(note="no nvidia-smi on PATH")
    done = run(
        [
            "nvidia-smi",
            "--query-gpu=index,name,memory.total,uuid,driver_version",
            "--format=csv,noheader,nounits",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if done.returncode != 0:
        return Driver(note=f"nvidia-smi failed: {done.stderr.strip() or done.stdout.strip()}")
    gpus, version = [], None
    for line in done.stdout.strip().splitlines():
        index, name, memory, uuid, version = (part.strip() for part in line.split(","))
        gpus.append(Gpu(int(index), name, int(float(memory)), uuid))
    return Driver(version=version, gpus=gpus, source="nvidia-smi")


def read_driver() -> Driver:
    driver = driver_from_nvml()
    if driver.source == "none":
        fallback = driver_from_nvidia_smi()
        if fallback.source != "none":
            return fallback
        driver.note = f"{driver.note}; {fallback.note}"
    return driver


def loaded_cuda_libraries(maps: Path = Path("/proc/self/maps")) -> list[str]:
    """Paths of the CUDA libraries mapped into this process, in load order."""
    try:
        text = maps.read_text()
    except OSError:
        return []
    paths = (line.split()[-1] for line in text.splitlines() if "/" in line)
    found = [path for path in paths if any(name in Path(path).name for name in CUDA_LIBRARIES)]
    return list(dict.fromkeys(found))


def _distribution(*names: str) -> str:
    """The first of these pip distributions that is installed, with its version."""
    for name in names:
        try:
            return f"{name} {importlib.metadata.version(name)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return ""


def _import(report: BackendReport, module: str):
    """The module (the report noting it imported), or None with the report saying why not."""
    try:
        imported = importlib.import_module(module)
    except ImportError as err:
        report.problem, report.fix = f"{report.name} does not import: {err}", STACK_FIX
        return None
    report.imported = True
    return imported


def probe_torch(gpu_present: bool) -> BackendReport:
    report = BackendReport("torch")
    if (torch := _import(report, "torch")) is None:
        return report
    report.version = torch.__version__
    report.cuda = f"built for CUDA {torch.version.cuda}" if torch.version.cuda else "CPU build"
    if not gpu_present:
        return report
    if not torch.cuda.is_available():
        report.problem = f"PyTorch {torch.__version__} sees no GPU although the driver lists one"
        report.fix = (
            f"PyTorch was built for CUDA {torch.version.cuda}; the driver must support it "
            "(CUDA 13 needs driver >= 580). " + STACK_FIX
        )
        return report
    values = torch.arange(1000, dtype=torch.float64, device="cuda")
    report.kernel_ok = float((values * 2).sum().item()) == 999000.0
    return report


def probe_cupy(gpu_present: bool) -> BackendReport:
    report = BackendReport("cupy")
    cupy = _import(report, "cupy")
    nvrtc = cupy and _import(report, "cupy_backends.cuda.libs.nvrtc")
    if nvrtc is None:
        report.imported = False  # CuPy without its NVRTC bindings cannot compile a kernel
        return report
    report.version = _distribution("cupy-cuda13x", "cupy-cuda12x", "cupy") or cupy.__version__
    built_for = "13" if "cuda13x" in report.version else "12" if "cuda12x" in report.version else ""
    if not gpu_present:
        return report
    try:
        runtime = _cuda_version(cupy.cuda.runtime.runtimeGetVersion())
        compiler_major, compiler_minor = nvrtc.getVersion()
        report.cuda = f"runtime {runtime}, NVRTC {compiler_major}.{compiler_minor}"
        if built_for and str(compiler_major) != built_for:
            report.problem = (
                f"{report.version} is built for CUDA {built_for} but loaded NVRTC "
                f"{compiler_major}.{compiler_minor}"
            )
            report.fix = STACK_FIX
            return report
        doubled = cupy.ElementwiseKernel("float64 x", "float64 y", "y = 2 * x", "doubled")
        report.kernel_ok = float(doubled(cupy.arange(1000, dtype=cupy.float64)).sum()) == 999000.0
    except Exception as err:  # CUDARuntimeError, NVRTCError, a missing library
        report.problem = f"CuPy cannot run a kernel: {type(err).__name__}: {err}"
        report.fix = STACK_FIX
    return report


def probe_numba_cuda(gpu_present: bool) -> BackendReport:
    report = BackendReport("numba-cuda")
    if (cuda := _import(report, "numba.cuda")) is None:
        return report
    report.version = _distribution("numba-cuda")
    if not report.version:
        report.version = f"numba {_distribution('numba')} (built-in numba.cuda)"
        report.problem = (
            "the built-in numba.cuda is deprecated and cannot find NVVM in pip's CUDA wheels"
        )
        report.fix = "pip install 'numba-cuda[cu13]' (or [cu12]); " + STACK_FIX
        return report
    if not gpu_present:
        return report
    try:
        if not cuda.is_available():
            raise RuntimeError("numba.cuda.is_available() is False")
        runtime = cuda.runtime.get_version()
        report.cuda = f"runtime {runtime[0]}.{runtime[1]}"

        @cuda.jit
        def double(values):
            index = cuda.grid(1)
            if index < values.size:
                values[index] *= 2

        values = cuda.to_device(_host_range())
        double[4, 256](values)
        report.kernel_ok = float(values.copy_to_host().sum()) == 999000.0
    except Exception as err:  # NvvmSupportError, CudaSupportError, a missing library
        report.problem = f"Numba-CUDA cannot run a kernel: {type(err).__name__}: {err}"
        report.fix = STACK_FIX
    return report


def _host_range():
    numpy = importlib.import_module("numpy")
    return numpy.arange(1000, dtype=numpy.float64)


PROBES: dict[str, Callable[[bool], BackendReport]] = {
    "torch": probe_torch,
    "cupy": probe_cupy,
    "numba-cuda": probe_numba_cuda,
}


@functools.cache
def backend_problem(name: str) -> str | None:
    """Why backend `name` cannot use the GPU this process sees, with the fix; None if it can.

    Run once per process before the first GPU experiment of that backend.
    """
    report = PROBES[name](True)
    if report.problem:
        return f"{report.problem}; fix: {report.fix}"
    if report.kernel_ok is False:
        return f"{name}: a test kernel gave a wrong result on this GPU; fix: {STACK_FIX}"
    return None


@dataclass
class Diagnosis:
    driver: Driver
    backends: list[BackendReport]
    libraries: list[str]

    @property
    def exit_code(self) -> int:
        broken = [b for b in self.backends if b.problem or b.kernel_ok is False]
        return 1 if self.driver.gpus and broken else 0


def diagnose(
    driver: Driver | None = None, probes: dict[str, Callable[[bool], BackendReport]] = PROBES
) -> Diagnosis:
    driver = driver or read_driver()
    reports = [probe(bool(driver.gpus)) for probe in probes.values()]
    return Diagnosis(driver, reports, loaded_cuda_libraries())


def render(diagnosis: Diagnosis) -> str:
    driver = diagnosis.driver
    lines = []
    if driver.source == "none":
        lines.append(f"NVIDIA driver: none found ({driver.note})")
    else:
        cuda = f", supports CUDA {driver.cuda}" if driver.cuda else ""
        lines.append(f"NVIDIA driver {driver.version}{cuda} (read with {driver.source})")
    for gpu in driver.gpus:
        lines.append(f"GPU {gpu.index}: {gpu.name}, {gpu.memory_mib} MiB, {gpu.uuid}")
    if not driver.gpus:
        lines.append("No NVIDIA GPU on this machine: GPU experiments will be 'unavailable'.")
    for report in diagnosis.backends:
        state = "imports" if report.imported else "does not import"
        details = ", ".join(part for part in (report.version, report.cuda) if part)
        kernel = {None: "", True: "; test kernel: correct", False: "; test kernel: WRONG"}
        lines.append(
            f"{report.name}: {state}{f' ({details})' if details else ''}{kernel[report.kernel_ok]}"
        )
        if report.problem:
            lines.append(f"  problem: {report.problem}")
            lines.append(f"  fix: {report.fix}")
    if diagnosis.libraries:
        lines.append("CUDA libraries loaded in this process:")
        lines += [f"  {path}" for path in diagnosis.libraries]
    verdict = (
        "A GPU is present but a backend cannot use it (see the fixes above)."
        if diagnosis.exit_code
        else "Every backend can use the GPU."
        if driver.gpus
        else "Nothing to fix without a GPU."
    )
    lines.append(verdict)
    return "\n".join(lines)
