"""`accelbench doctor`: can each GPU backend load its CUDA libraries and run a kernel here?

The three GPU stacks find their CUDA libraries in different ways: torch links
the CUDA 13 wheels it pins, CuPy and Numba-CUDA look them up at run time with
cuda-pathfinder, which takes the first major version it finds. A venv that
mixes them can import every package and still fail, or silently run CuPy's
CUDA 12 build on CUDA 13's compiler. And a build carries code for some GPU
architectures only: the CUDA 13 torch has none for Volta, yet sees a V100. The
doctor reports, for the driver, each GPU (with its compute capability) and each
backend, what was loaded from where, which architectures the build can run and
whether a tiny kernel gives the right answer, and names the fix (the stack to
pick) when a GPU is present but a backend cannot use it. Each backend declares the
probe that inspects it (accelbench.backends.Backend.probe): the package's are here,
and an installed backend's probe is listed by `accelbench doctor` after them.

It checks each backend the way the experiments use it: after the measuring
process's imports (measurement.preload), in a forked child. So it fails where
those imports have initialised CUDA and no forked run could use it. The
workflow asks the same check once per process before any GPU experiment
(`backend_problem`), also in a forked child (accelbench.platform.forked_cuda), so a
broken stack or an unsupported GPU or precision becomes an "unavailable" record
naming the cause, and the asking process never holds a CUDA context.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import os
import shutil
import subprocess
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from accelbench.platform import forked_cuda, gpu_support
from accelbench.platform.gpu_support import Capability, VisibleGpu, capability_text
from accelbench.platform.processes import call_in_fork

# The CUDA libraries worth naming: runtime, compiler (NVRTC, NVVM), BLAS, FFT, driver.
CUDA_LIBRARIES = ("libcuda.so", "libcudart", "libnvrtc", "libnvvm", "libcublas", "libcufft")
STACK_FIX = (
    "install one CUDA stack: `make CUDA=13` (driver >= 580) or `make CUDA=12` (driver >= 525); "
    "see docs/install.md, CUDA stacks"
)
# The test suite runs Numba-CUDA kernels under Numba's CUDA simulator
# (NUMBA_ENABLE_CUDASIM=1) and says so with this variable; anywhere else the
# simulator's times would be recorded as GPU times.
SIMULATOR_ALLOWANCE = "ACCELBENCH_ALLOW_CUDA_SIMULATOR"
# What gives JAX a GPU: jaxlib's CUDA plugin, in the CUDA 13 stack's extra.
JAX_GPU_FIX = (
    "jaxlib's CUDA plugin comes with the CUDA 13 stack (`make CUDA=13`, driver >= 580); "
    "the CUDA 12 stack has none (docs/install.md, CUDA stacks)"
)
BAD_FORK_FIX = (
    "report it: something imported before the runs are forked (measurement.preload) asks "
    "the CUDA driver"
)


@dataclass
class Gpu:
    index: int
    name: str
    memory_mib: int
    uuid: str
    capability: Capability | None = None  # compute capability, where the driver says


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
    archs: list[str] = field(default_factory=list)  # GPU architectures it can run (gpu_support)
    gpus: list[VisibleGpu] = field(default_factory=list)  # the GPUs it sees, in its own order


# How a backend's GPU stack is inspected, with its test kernel on the given GPU (None: none).
# Each backend declares its own (accelbench.backends.Backend.probe).
Probe = Callable[[int | None], BackendReport]


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
                    capability=tuple(nvml.nvmlDeviceGetCudaComputeCapability(handle)),
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
            "--query-gpu=index,name,memory.total,uuid,driver_version,compute_cap",
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
        try:
            index, name, memory, uuid, version, capability = (
                part.strip() for part in line.split(",")
            )
            major, minor = capability.split(".")
            gpus.append(Gpu(int(index), name, int(float(memory)), uuid, (int(major), int(minor))))
        except ValueError:
            return Driver(note=f"nvidia-smi answered what it does not write: {line!r}")
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


def cuda_simulator_refusal() -> str | None:
    """Why Numba-CUDA may not measure here: its CUDA simulator is on outside the test suite."""
    from numba import config  # Numba: lazy, as every backend import here

    if not config.ENABLE_CUDASIM or os.environ.get(SIMULATOR_ALLOWANCE) == "1":
        return None
    return (
        "NUMBA_ENABLE_CUDASIM=1 is set: Numba-CUDA would run its CUDA simulator on the CPU "
        "and its times would be recorded as GPU times; unset NUMBA_ENABLE_CUDASIM"
    )


def _build(report: BackendReport) -> str:
    """The backend's build as people name it: "torch 2.14.1+cu130", "cupy-cuda13x 14.2.0"."""
    if report.version.startswith(report.name):
        return report.version
    return f"{report.name} {report.version}".strip()


def _no_gpu(report: BackendReport, kernel_gpu: int | None, why: str, fix: str | None = None):
    """Note that the backend does not see GPU `kernel_gpu` (a problem only where one is asked)."""
    if kernel_gpu is not None and kernel_gpu >= len(report.gpus):
        seen = f"sees {len(report.gpus)} GPU(s), not GPU {kernel_gpu}" if report.gpus else why
        report.problem, report.fix = f"{report.name} {seen}", fix


def _kernel_check(report: BackendReport, gpu: int | None, run: Callable[[], bool]) -> None:
    """The backend's test kernel on GPU `gpu`, where it sees that GPU and has code for it
    (on a GPU without code the kernel would only fail with "no kernel image")."""
    if gpu is None or report.problem:
        return
    seen = report.gpus[gpu]
    if problem := gpu_support.arch_problem(seen.capability, report.archs, _build(report)):
        report.problem = f"GPU {gpu} ({seen.name}): {problem}"
        report.fix = gpu_support.stack_advice([seen.capability], None)
        return
    try:
        report.kernel_ok = run()
    except Exception as err:  # CUDA, NVRTC or NVVM errors, a missing library
        report.problem = (
            f"{report.name} cannot run a kernel on GPU {gpu}: {type(err).__name__}: {err}"
        )
        report.fix = STACK_FIX


def probe_torch(kernel_gpu: int | None, torch=None) -> BackendReport:
    """torch's build, architectures and GPUs; its test kernel on `kernel_gpu` (None: none).

    `torch` stands in for the module where given.
    """
    report = BackendReport("torch")
    if (torch := torch or _import(report, "torch")) is None:
        return report
    report.imported = True
    # A str, not torch's own version class: the process that reads the report back would
    # import torch for it (forked_cuda.ask).
    report.version = str(torch.__version__)
    report.cuda = f"built for CUDA {torch.version.cuda}" if torch.version.cuda else "CPU build"
    report.archs = torch.cuda.get_arch_list()
    if torch.cuda.is_available():
        report.gpus = [
            VisibleGpu(
                i,
                torch.cuda.get_device_name(i),
                torch.cuda.get_device_capability(i),
                str(torch.cuda.get_device_properties(i).uuid),
            )
            for i in range(torch.cuda.device_count())
        ]
    _no_gpu(
        report,
        kernel_gpu,
        f"{torch.__version__} sees no GPU",
        f"PyTorch was built for CUDA {torch.version.cuda}; the driver must support it. {STACK_FIX}",
    )

    def doubled() -> bool:
        values = torch.arange(1000, dtype=torch.float64, device=f"cuda:{kernel_gpu}")
        return float((values * 2).sum().item()) == 999000.0

    _kernel_check(report, kernel_gpu, doubled)
    return report


def probe_cupy(kernel_gpu: int | None) -> BackendReport:
    """CuPy's build, its compiler's architectures and GPUs; its test kernel on `kernel_gpu`."""
    report = BackendReport("cupy")
    cupy = _import(report, "cupy")
    nvrtc = cupy and _import(report, "cupy_backends.cuda.libs.nvrtc")
    if nvrtc is None:
        report.imported = False  # CuPy without its NVRTC bindings cannot compile a kernel
        return report
    report.version = _distribution("cupy-cuda13x", "cupy-cuda12x", "cupy") or cupy.__version__
    built_for = "13" if "cuda13x" in report.version else "12" if "cuda12x" in report.version else ""
    try:
        compiler_major, compiler_minor = nvrtc.getVersion()
        report.archs = gpu_support.compiler_archs(nvrtc.getSupportedArchs())
    except Exception as err:  # NVRTC's library missing or of another CUDA major version
        report.problem = f"CuPy cannot load NVRTC: {type(err).__name__}: {err}"
        report.fix = STACK_FIX
        return report
    report.cuda = f"NVRTC {compiler_major}.{compiler_minor}"
    if built_for and str(compiler_major) != built_for:
        report.problem = (
            f"{report.version} is built for CUDA {built_for} but loaded NVRTC "
            f"{compiler_major}.{compiler_minor}"
        )
        report.fix = STACK_FIX
        return report
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:  # CUDARuntimeError: no driver, no device
        _no_gpu(report, kernel_gpu, f"finds no usable CUDA device ({type(err).__name__}: {err})")
        return report
    for index in range(count):
        properties = cupy.cuda.runtime.getDeviceProperties(index)
        capability = (properties["major"], properties["minor"])
        report.gpus.append(VisibleGpu(index, _text(properties["name"]), capability))
    if count:
        runtime = _cuda_version(cupy.cuda.runtime.runtimeGetVersion())
        report.cuda = f"runtime {runtime}, {report.cuda}"

    def doubled() -> bool:
        with cupy.cuda.Device(kernel_gpu):
            kernel = cupy.ElementwiseKernel("float64 x", "float64 y", "y = 2 * x", "doubled")
            return float(kernel(cupy.arange(1000, dtype=cupy.float64)).sum()) == 999000.0

    _no_gpu(report, kernel_gpu, "sees no GPU")
    _kernel_check(report, kernel_gpu, doubled)
    return report


def probe_numba_cuda(kernel_gpu: int | None) -> BackendReport:
    """Numba-CUDA's build, its compiler's architectures and GPUs; its kernel on `kernel_gpu`."""
    report = BackendReport("numba-cuda")
    if (cuda := _import(report, "numba.cuda")) is None:
        return report
    if refusal := cuda_simulator_refusal():
        report.problem, report.fix = refusal, "unset NUMBA_ENABLE_CUDASIM"
        return report
    report.version = _distribution("numba-cuda")
    if not report.version:
        report.version = f"numba {_distribution('numba')} (built-in numba.cuda)"
        report.problem = (
            "the built-in numba.cuda is deprecated and cannot find NVVM in pip's CUDA wheels"
        )
        report.fix = "pip install 'numba-cuda[cu13]' (or [cu12]); " + STACK_FIX
        return report
    if importlib.import_module("numba").config.ENABLE_CUDASIM:
        report.cuda = f"CUDA simulator (NUMBA_ENABLE_CUDASIM=1, {SIMULATOR_ALLOWANCE}=1)"
        return report
    try:
        nvrtc = importlib.import_module("numba.cuda.cudadrv.nvrtc")
        report.archs = gpu_support.compiler_archs(nvrtc.get_supported_ccs())
        if cuda.is_available():
            report.gpus = [
                VisibleGpu(gpu.id, _text(gpu.name), tuple(gpu.compute_capability))
                for gpu in cuda.gpus
            ]
            runtime = cuda.runtime.get_version()
            report.cuda = f"runtime {runtime[0]}.{runtime[1]}"
    except Exception as err:  # NvvmSupportError, CudaSupportError, a missing library
        report.problem = f"Numba-CUDA cannot load CUDA: {type(err).__name__}: {err}"
        report.fix = STACK_FIX
        return report

    def doubled() -> bool:
        @cuda.jit
        def double(values):
            index = cuda.grid(1)
            if index < values.size:
                values[index] *= 2

        with cuda.gpus[kernel_gpu], warnings.catch_warnings():
            # Four blocks on purpose: Numba-CUDA's low-occupancy warning would otherwise
            # appear in the log of every run that checks the backend.
            warnings.filterwarnings("ignore", message=gpu_support.LOW_OCCUPANCY_WARNING)
            values = cuda.to_device(_host_range())
            double[4, 256](values)
            return float(values.copy_to_host().sum()) == 999000.0

    _no_gpu(report, kernel_gpu, "finds no CUDA driver or device on this host")
    _kernel_check(report, kernel_gpu, doubled)
    return report


def probe_jax(kernel_gpu: int | None) -> BackendReport:
    """JAX's build (jaxlib, and its CUDA plugin where one is installed) and the GPUs it
    sees; its test kernel, in float64, on `kernel_gpu`. A jaxlib without a CUDA plugin is
    no problem: JAX's GPU cells then say so (accelbench.backends.jax)."""
    report = BackendReport("jax")
    if (jax := _import(report, "jax")) is None:
        return report
    report.version = f"{_distribution('jax')}, {_distribution('jaxlib')}"
    plugin = _distribution("jax-cuda13-plugin", "jax-cuda12-plugin")
    report.cuda = plugin or "CPU build (no CUDA plugin)"
    if not plugin:
        return report
    try:
        gpus = jax.devices("cuda")
    except RuntimeError as err:  # the plugin finds no driver or no device
        _no_gpu(report, kernel_gpu, f"finds no usable CUDA device ({err})", STACK_FIX)
        return report
    report.gpus = [
        VisibleGpu(index, gpu.device_kind, tuple(map(int, gpu.compute_capability.split("."))))
        for index, gpu in enumerate(gpus)
    ]

    def doubled() -> bool:
        jax.config.update("jax_enable_x64", True)
        values = jax.device_put(_host_range(), gpus[kernel_gpu])
        return float((values * 2).sum()) == 999000.0

    _no_gpu(report, kernel_gpu, "sees no GPU")
    _kernel_check(report, kernel_gpu, doubled)
    return report


def _host_range():
    numpy = importlib.import_module("numpy")
    return numpy.arange(1000, dtype=numpy.float64)


# The package's GPU stacks by backend name, as their backends declare them: what is asked
# by name (backend_problem, visible_gpus) and checked ahead of a GPU job.
PROBES: dict[str, Probe] = {
    "torch": probe_torch,
    "cupy": probe_cupy,
    "numba-cuda": probe_numba_cuda,
    "jax": probe_jax,
}


def inspect_backend(name: str, probe: Probe, kernel_gpu: int | None) -> BackendReport:
    """Backend `name`'s report from `probe` in this process, with the CUDA libraries it has
    loaded; in a child of a process that had initialised CUDA, that problem instead."""
    if forked_cuda.in_bad_fork():
        return BackendReport(name, problem=forked_cuda.BAD_FORK, fix=BAD_FORK_FIX)
    report = probe(kernel_gpu)
    report.libraries = loaded_cuda_libraries()
    return report


@functools.cache
def inspected(name: str, kernel_gpu: int | None, probe: Probe | None = None) -> BackendReport:
    """Backend `name`'s report by `probe` (None: the package's, PROBES), inspected in a
    forked child (forked_cuda.ask), once per process."""
    return forked_cuda.ask(inspect_backend, name, probe or PROBES[name], kernel_gpu)


def visible_gpus() -> list[VisibleGpu]:
    """The GPUs PyTorch can use in this process (none without a driver or a GPU).

    Asked in a forked child: this process may still fork runs or launch ranks that use them.
    """
    return inspected("torch", None).gpus


def backend_problem(
    name: str, gpus: Sequence[int] = (0,), precision: str | None = None, probe: Probe | None = None
) -> str | None:
    """Why backend `name` cannot run an experiment on this process's GPUs `gpus` in
    `precision` (a training precision or a kernel dtype), with the fix; None if it can.
    An installed backend names its `probe`; the package's are found by name.

    The backend runs its test kernel on the first of the GPUs in a forked child,
    once per process; every GPU is checked against the architectures the backend
    carries, and the precision against what the GPU generation really computes.
    """
    report = inspected(name, gpus[0], probe)
    if report.problem:
        return f"{report.problem}; fix: {report.fix}" if report.fix else report.problem
    if len(report.gpus) <= max(gpus):
        return f"{name} sees {len(report.gpus)} GPU(s); this experiment needs {len(gpus)}"
    if report.kernel_ok is False:
        return f"{name}: a test kernel gave a wrong result on this GPU; fix: {STACK_FIX}"
    for gpu in (report.gpus[index] for index in gpus):
        if problem := gpu_support.arch_problem(gpu.capability, report.archs, _build(report)):
            fix = gpu_support.stack_advice([gpu.capability], None)
            return f"GPU {gpu.index} ({gpu.name}): {problem}; fix: {fix}"
        if precision and (problem := gpu_support.precision_problem(gpu.capability, precision)):
            return f"GPU {gpu.index} ({gpu.name}): {problem}"
    return None


@dataclass
class Diagnosis:
    driver: Driver
    backends: list[BackendReport]
    libraries: list[str]

    @property
    def forks_broken(self) -> bool:
        """Whether the imports before the fork initialised CUDA: no forked run could use it."""
        return any(report.problem == forked_cuda.BAD_FORK for report in self.backends)

    def unsupported(self, gpu: Gpu) -> list[str]:
        """Why backends cannot drive `gpu`, one reason each, from its compute capability."""
        if gpu.capability is None:
            return []
        found = []
        for report in self.backends:
            if problem := gpu_support.arch_problem(gpu.capability, report.archs, _build(report)):
                found.append(problem)
        return found

    @property
    def exit_code(self) -> int:
        broken = [b for b in self.backends if b.problem or b.kernel_ok is False]
        unsupported = any(self.unsupported(gpu) for gpu in self.driver.gpus)
        return 1 if self.forks_broken or (self.driver.gpus and (broken or unsupported)) else 0


def diagnose(
    driver: Driver | None = None,
    probes: Mapping[str, Probe] = PROBES,
    preload: Callable[[], None] | None = None,
) -> Diagnosis:
    """Each backend of `probes` (`accelbench doctor`: every backend's that declares one,
    accelbench.backends.probes) inspected as the experiments use it: after `preload` (the
    measuring process's imports), in a forked child, with its test kernel on GPU 0 if the
    driver lists a GPU."""
    driver = driver or read_driver()
    if preload is not None:
        preload()
    preloaded = loaded_cuda_libraries()
    kernel_gpu = 0 if driver.gpus else None
    reports = []
    for name, probe in probes.items():
        report = call_in_fork(inspect_backend, name, probe, kernel_gpu)
        report.libraries = [path for path in report.libraries if path not in preloaded]
        reports.append(report)
    return Diagnosis(driver, reports, preloaded)


def _gpu_lines(diagnosis: Diagnosis, gpu: Gpu) -> list[str]:
    capability = f", compute capability {capability_text(gpu.capability)}" if gpu.capability else ""
    lines = [f"GPU {gpu.index}: {gpu.name}, {gpu.memory_mib} MiB, {gpu.uuid}{capability}"]
    if gpu.capability is None:
        return lines
    unsupported = diagnosis.unsupported(gpu)
    lines += [f"  cannot run: {problem}" for problem in unsupported]
    if unsupported:
        advice = gpu_support.stack_advice([gpu.capability], _driver_cuda(diagnosis.driver))
        lines.append(f"  fix: {advice}")
    refused = [
        precision
        for precision in ("bf16", "tf32")
        if gpu_support.precision_problem(gpu.capability, precision)
    ]
    if refused:
        lines.append(
            f"  {' and '.join(refused)} experiments are unavailable on it: "
            + "; ".join(gpu_support.precision_problem(gpu.capability, p) for p in refused)
        )
    return lines


def _driver_cuda(driver: Driver) -> Capability | None:
    if not driver.cuda:
        return None
    major, minor = driver.cuda.split(".")
    return int(major), int(minor)


def render(diagnosis: Diagnosis) -> str:
    driver = diagnosis.driver
    lines = []
    if driver.source == "none":
        lines.append(f"NVIDIA driver: none found ({driver.note})")
    else:
        cuda = f", supports CUDA {driver.cuda}" if driver.cuda else ""
        lines.append(f"NVIDIA driver {driver.version}{cuda} (read with {driver.source})")
    for gpu in driver.gpus:
        lines += _gpu_lines(diagnosis, gpu)
    if not driver.gpus:
        lines.append("No NVIDIA GPU on this machine: GPU experiments will be 'unavailable'.")
    for report in diagnosis.backends:
        state = (
            "not checked"
            if report.problem == forked_cuda.BAD_FORK
            else "imports"
            if report.imported
            else "does not import"
        )
        details = ", ".join(part for part in (report.version, report.cuda) if part)
        kernel = {None: "", True: "; test kernel: correct", False: "; test kernel: WRONG"}
        lines.append(
            f"{report.name}: {state}{f' ({details})' if details else ''}{kernel[report.kernel_ok]}"
        )
        if report.archs:
            lines.append(f"  runs on: {' '.join(report.archs)}")
        if report.problem:
            lines.append(f"  problem: {report.problem}")
            lines.append(f"  fix: {report.fix or STACK_FIX}")
        if report.libraries:
            lines.append("  CUDA libraries it loaded besides those of the imports:")
            lines += [f"    {path}" for path in report.libraries]
    if diagnosis.libraries:
        lines.append("CUDA libraries loaded by the measuring process's imports:")
        lines += [f"  {path}" for path in diagnosis.libraries]
    verdict = (
        "The imports before the runs fork initialise CUDA: no forked run can use a GPU."
        if diagnosis.forks_broken
        else "A GPU is present but a backend cannot use it (see the fixes above)."
        if diagnosis.exit_code
        else "Every backend can use the GPU."
        if driver.gpus
        else "Nothing to fix without a GPU."
    )
    lines.append(verdict)
    return "\n".join(lines)
