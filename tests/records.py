"""Hand-made result records for the analysis tests: small, fixed, with every status.

TRAIN and KERNELS are the CPU-and-one-GPU sets of the classic table; GPU_TRAIN
adds thread counts, precisions and multi-GPU DDP so that speedup, precision and
scaling have something to show. Times are chosen so that medians and
intervals are easy to check by hand.
"""

from __future__ import annotations

import copy

from accelbench.families.roof import GPU_CEILINGS
from accelbench.kernels import kernels
from accelbench.measuring import energy
from accelbench.measuring.statistics import rate_from_time, summarize, value
from accelbench.platform.devices import parse_device
from accelbench.records.record import make_record, validate_record, write_record

NO_GPU = "no CUDA device available to PyTorch on this host (CUDA_VISIBLE_DEVICES='')"
FAILED = "RuntimeError: 100% of threads_busy"
OOM = "OutOfMemoryError: CUDA out of memory"


def provenance(gpus=(), slurm=None, host="node01"):
    return {
        "host": host,
        "platform": "Linux",
        "cpu_model": "Test CPU",
        "cpu_count": 16,
        "usable_cpus": 16,
        "cpu_topology": {
            "sockets": 1,
            "numa_nodes": {"0": list(range(16))},
            "cores": 8,
            "logical_cpus": 16,
            "threads_per_core": 2,
            "smt_active": True,
            "usable": list(range(16)),
        },
        "python": "3.11.9",
        "libraries": {"torch": "2.5.0"},
        "accelerator": {"cuda_runtime": None, "cudnn": None, "gpus": list(gpus), "driver": None},
        "cuda_visible_devices": None,
        "modules": [],
        "git": {"commit": "abc123", "dirty": False},
        "config_hash": "0123456789abcdef",
        "slurm": slurm,
        "seed": 0,
        "started": "2024-05-01T12:00:00.000+00:00",
        "finished": "2024-05-01T12:00:05.000+00:00",
    }


def train_record(
    model,
    device,
    status="ok",
    samples=None,
    reason=None,
    precision="fp32",
    strategy="single",
    batch=16,
):
    exp_id = f"train/{model}/{device}/{precision}/{strategy}/bs{batch}"
    params = {
        "model": model,
        "device": device,
        "precision": precision,
        "strategy": strategy,
        "batch": batch,
        "steps": len(samples or []),
        "warmup_steps": 3,
        "image_size": 64,
        "seed": 0,
    }
    metrics = None
    if status == "ok":
        time = summarize(samples, "s")
        metrics = {
            "time_per_batch": time,
            "throughput": rate_from_time(time, batch, "samples/s"),
            "peak_memory": value(123456789, "bytes"),
            "loss_first": value(2.5, "loss"),
            "loss_last": value(2.1, "loss"),
            "parameters": value(11_000_000, "count"),
        }
    slurm = {
        "job_id": "42",
        "partition": "medium",
        "node": "node01",
        "cpus_per_task": "16",
        "job_gpus": None,
        "ntasks": "1",
        "mem_per_node_mb": "4000",
    }
    return exp_id, make_record(
        experiment="train",
        experiment_id=exp_id,
        status=status,
        params=params,
        provenance=provenance(slurm=slurm),
        metrics=metrics,
        reason=reason,
    )


def device_record(experiment, exp_id, status, params, metrics, check, reason, host="node01"):
    """(id, record) of a kernel or data science experiment: on `host`, with an H100 where
    the device (params["device"]) is a GPU."""
    gpus = ["NVIDIA H100"] if params["device"].startswith("cuda") else []
    return exp_id, make_record(
        experiment=experiment,
        experiment_id=exp_id,
        status=status,
        params=params,
        provenance=provenance(gpus, host=host),
        metrics=metrics,
        check=check,
        reason=reason,
    )


def kernel_record(backend, device, size, status="ok", samples=None, reason=None):
    exp_id = f"kernels/matmul/{device}/{backend}/float32/n{size}"
    params = {
        "kernel": "matmul",
        "device": device,
        "backend": backend,
        "dtype": "float32",
        "size": size,
        "seed": 0,
        "min_run_time": 0.3,
        "samples": 10,
    }
    metrics = check = None
    if status == "ok":
        time = summarize(samples, "s")
        flops = 2 * size**3
        metrics = {
            "time": time,
            "gflops": rate_from_time(time, flops / 1e9, "GFLOP/s"),
            "bandwidth": rate_from_time(time, 12 * size**2 / 1e9, "GB/s"),
            "arithmetic_intensity": value(flops / (12 * size**2), "flop/byte"),
            "first_call_time": value(0.01, "s"),
            "threads": value(1, "threads"),
        }
        check = {
            "passed": True,
            "relative_error": 1e-7,
            "tolerance": 1e-4,
            "reference": "numpy float64",
        }
    return device_record("kernel", exp_id, status, params, metrics, check, reason)


def steps(start, stride, count=10):
    return [start + stride * i for i in range(count)]


TRAIN = [
    train_record(
        "resnet18", "cpu1", samples=[0.50, 0.51, 0.52, 0.53, 0.54, 0.56, 0.57, 0.58, 0.59, 0.60]
    ),
    train_record(
        "resnet18",
        "cpu2",
        samples=[0.300, 0.305, 0.310, 0.315, 0.320, 0.330, 0.335, 0.340, 0.345, 0.350],
    ),
    train_record("resnet18", "cpu16", samples=steps(0.100, 0.001)),
    train_record("resnet18", "cuda1", "unavailable", reason=NO_GPU),
    train_record("resnet50", "cpu1", samples=[0.8, 0.9, 1.0, 1.1, 1.2]),
    train_record("resnet50", "cuda1", "unavailable", reason=NO_GPU),
    train_record("vgg11", "cpu1", samples=steps(1.0, 0.1)),
    train_record("vgg11", "cpu2", "failed", reason=FAILED),
    train_record("vgg11", "cuda1", "oom", reason=OOM),
]
# Torch matmul on one and two threads at two sizes, ok and clearly apart.
TORCH_CPU_KERNELS = [
    kernel_record("torch", "cpu1", 256, samples=steps(2.00e-4, 0.01e-4)),
    kernel_record("torch", "cpu1", 512, samples=steps(1.60e-3, 0.01e-3)),
    kernel_record("torch", "cpu2", 256, samples=steps(1.10e-4, 0.01e-4)),
    kernel_record("torch", "cpu2", 512, samples=steps(0.90e-3, 0.01e-3)),
]
KERNELS = [
    *TORCH_CPU_KERNELS,
    kernel_record("numba", "cuda1", 256, "unavailable", reason=NO_GPU),
    kernel_record("numba", "cuda1", 512, "unavailable", reason=NO_GPU),
]


def write_records(root, records):
    paths = []
    for exp_id, record in records:
        paths.append(write_record(root / f"{exp_id}.json", record))
    return paths


def scaled(start, factor, count=10, spread=0.01):
    """`count` samples from `start` * factor upwards in steps of `spread` (relative)."""
    return [start * factor * (1 + spread * i) for i in range(count)]


# Thread scaling on the CPU, three precisions on one GPU, DDP on two and four GPUs.
GPU_TRAIN = [
    *(
        train_record(model, f"cpu{n}", samples=scaled(base, n**-0.8))
        for model, base in (("resnet18", 0.5), ("lstm", 0.3))
        for n in (1, 2, 4)
    ),
    *(
        train_record(model, "cuda1", samples=scaled(base / 40, factor), precision=precision)
        for model, base in (("resnet18", 0.5), ("lstm", 0.3))
        for precision, factor in (("fp32", 1.0), ("bf16", 0.6), ("fp16", 0.5))
    ),
    *(
        train_record(
            model, f"cuda{k}", samples=scaled(base / 40, 1.8), strategy="ddp", batch=16 * k
        )
        for model, base in (("resnet18", 0.5), ("lstm", 0.3))
        for k in (2, 4)
    ),
    train_record("vgg11", "cpu1", samples=scaled(3.0, 1.0)),
    train_record("vgg11", "cuda1", "oom", reason=OOM),
    train_record("vgg11", "cuda2", "failed", reason=FAILED, strategy="ddp", batch=32),
]


# fcn with DDP over nodes: one node of one and of two processes, then 2 and 4 such nodes.
# Against one node with the same processes per node: efficiency 0.75 (2x1cpu, against
# cpu1 single: one node cannot run DDP with one process), 0.9 (2x2cpu) and 0.8 (4x2cpu).
NODE_TRAIN = [
    train_record("fcn", "cpu1", samples=scaled(0.02, 1.0)),
    train_record("fcn", "cpu2", samples=scaled(0.02, 0.6), strategy="ddp"),
    train_record("fcn", "2x1cpu", samples=scaled(0.02, 1 / 1.5), strategy="ddp"),
    train_record("fcn", "2x2cpu", samples=scaled(0.02, 0.6 / 1.8), strategy="ddp"),
    train_record("fcn", "4x2cpu", samples=scaled(0.02, 0.6 / 3.2), strategy="ddp"),
    train_record("fcn", "2x4cpu", "failed", reason=FAILED, strategy="ddp"),
]


NO_RAPL = (
    "RAPL counter /sys/class/powercap/intel-rapl:0/energy_uj cannot be read: Permission denied"
)


def power_of(device: str) -> tuple[float, float]:
    """(working, idle) watts of a made-up device: 300 W per GPU over 60 W idle, a CPU
    package 40 W plus 10 W per thread over 30 W idle, on each node."""
    parsed = parse_device(device)
    if parsed.is_gpu:
        return 300.0 * parsed.units, 60.0 * parsed.units
    return (40.0 * parsed.nodes + 10.0 * parsed.units, 30.0 * parsed.nodes)


def with_energy(records, unreadable=("cpu4",)):
    """`records` with an energy section and metrics where they ran: three one-second windows
    at the device's power (`power_of`), 2% apart; devices in `unreadable` say why not."""
    changed = []
    for exp_id, record in records:
        record = copy.deepcopy(record)
        params, metrics = record["params"], record["metrics"]
        if record["status"] == "ok":
            device = params["device"]
            if device in unreadable:
                record["energy"] = energy.unavailable(NO_RAPL)
            else:
                train = record["experiment"] == "train"
                seconds = metrics["time_per_batch" if train else "time"]["median"]
                watts, idle = power_of(device)
                calls = max(1, round(1.0 / seconds))
                record["energy"] = {
                    "status": "ok",
                    "reason": None,
                    "method": "nvml total-energy counter (GPU-0)"
                    if device.startswith("cuda")
                    else "rapl powercap (package-0)",
                    "unit": "step" if train else "call",
                    "samples_per_unit": params["batch"] if train else None,
                    "counter_period_s": energy.NVML_PERIOD_S,
                    "baseline_w": idle,
                    "baseline_s": 1.0,
                    "windows": [
                        {
                            "joules": watts * calls * seconds * factor,
                            "seconds": calls * seconds,
                            "calls": calls,
                        }
                        for factor in (0.98, 1.0, 1.02)
                    ],
                }
                metrics.update(energy.metrics(record["energy"]))
        validate_record(record)
        changed.append((exp_id, record))
    return changed


DATASCI_ITEMS = {"groupby": "rows", "kmeans": "samples", "pagerank": "nodes"}
DATASCI_LIBRARIES = {
    "groupby": ("pandas", "cudf"),
    "kmeans": ("sklearn", "cuml"),
    "pagerank": ("networkx", "cugraph"),
}


def datasci_record(workload, device, size, seconds=None, status="ok", transfer=None):
    """A data science record: the CPU library on a CPU, the GPU library on a GPU (with its
    transfer time, which `transfer` sets), or a cell that could not run."""
    backend = DATASCI_LIBRARIES[workload][device.startswith("cuda")]
    exp_id = f"datasci/{workload}/{device}/{backend}/n{size}"
    params = {"workload": workload, "device": device, "backend": backend, "size": size}
    params |= {"seed": 0, "min_run_time": 0.1, "samples": 10, "item": DATASCI_ITEMS[workload]}
    metrics = check = None
    if status == "ok":
        time = summarize(scaled(seconds, 1.0, spread=0.05), "s")
        metrics = {"time": time, "item_throughput": rate_from_time(time, size, "items/s")}
        if transfer is not None:
            end_to_end = summarize(scaled(seconds + transfer, 1.0, spread=0.05), "s")
            metrics["transfer_time"] = summarize(scaled(transfer, 1.0, spread=0.05), "s")
            metrics["end_to_end_time"] = end_to_end
            metrics["end_to_end_item_throughput"] = rate_from_time(end_to_end, size, "items/s")
        check = {"passed": True, "relative_error": 0.0, "tolerance": 0.0, "reference": "pandas"}
    reason = None if status == "ok" else NO_GPU
    return device_record("datasci", exp_id, status, params, metrics, check, reason)


def datasci_records(devices):
    """Three workloads from 1e3 to 1e6; the GPU pays from about 1e5 (copies included)."""
    records = []
    for workload, cost in zip(DATASCI_LIBRARIES, (1e-8, 5e-7, 2e-6), strict=True):
        for device in devices:
            gpu = device.startswith("cuda")
            for size in (1_000, 10_000, 100_000, 1_000_000):
                if gpu:
                    seconds, transfer = 2e-4 + cost * size / 50, 1e-4 + 1e-9 * size
                else:
                    seconds, transfer = cost * size, None
                records.append(datasci_record(workload, device, size, seconds, transfer=transfer))
    if any(device.startswith("cuda") for device in devices):
        records.append(datasci_record("groupby", "cuda1", 10_000_000, status="unavailable"))
    return records


def roof_record(device, dtype="float32", peak=100.0, copy=20.0, host_copy=None, status="ok"):
    """A roof record: peak GEMM rate and memory bandwidth from ten samples around a second;
    on a GPU also the pinned copies in (`host_copy` GB/s) and out (half as fast), or why
    not."""
    exp_id = f"roofs/{device}/{dtype}"
    params = {"device": device, "dtype": dtype, "gemm_size": 1024, "copy_size": 1 << 23}
    metrics = check = None
    if status == "ok":
        time = summarize(scaled(1.0, 1.0), "s")
        metrics = {
            "peak_gflops": rate_from_time(time, peak, "GFLOP/s"),
            "memory_bandwidth": rate_from_time(time, copy, "GB/s"),
            "threads": value(1, "threads"),
        }
        check = {"passed": True, "relative_error": 1e-7, "reference": "numpy float64"}
        if host_copy is not None:
            metrics["h2d_bandwidth"] = rate_from_time(time, host_copy, "GB/s")
            metrics["d2h_bandwidth"] = rate_from_time(time, host_copy / 2, "GB/s")
        elif device.startswith("cuda"):
            check["unmeasured"] = dict.fromkeys(GPU_CEILINGS, "no pinned copies")
    reason = None if status == "ok" else NO_GPU
    return device_record("roof", exp_id, status, params, metrics, check, reason)


def timed_kernel(kernel, device, backend, size, seconds, end_to_end=None, **options):
    """A kernel record of `seconds` a call (samples 1% apart: an interval of about +-4%); a
    GPU's with its `end_to_end` time (copies in and out) where given. `options`: dtype
    (float32), host (gpu01)."""
    dtype, host = options.get("dtype", "float32"), options.get("host", "gpu01")
    gigaflops = kernels()[kernel].flops(size) / 1e9
    exp_id = f"kernels/{kernel}/{device}/{backend}/{dtype}/n{size}"
    params = {"kernel": kernel, "device": device, "backend": backend, "dtype": dtype}
    params |= {"size": size, "seed": 0, "min_run_time": 0.1, "samples": 10}
    time = summarize(scaled(seconds, 1.0), "s")
    metrics = {"time": time, "gflops": rate_from_time(time, gigaflops, "GFLOP/s")}
    if end_to_end is not None:
        metrics["transfer_time"] = summarize(scaled(end_to_end - seconds, 1.0), "s")
        metrics["end_to_end_time"] = end_to_end = summarize(scaled(end_to_end, 1.0), "s")
        metrics["end_to_end_gflops"] = rate_from_time(end_to_end, gigaflops, "GFLOP/s")
    check = {"passed": True, "relative_error": 1e-7, "tolerance": 1e-4, "reference": "numpy"}
    return device_record("kernel", exp_id, "ok", params, metrics, check, None, host)


# One GPU host, gpu01, measuring its GPU and its 16 CPUs at the same cells. matmul: the
# CPU (numpy, 0.1 ms at n=256) ahead at the smallest size, the GPU (torch) 10x and 50x
# ahead at the larger ones, copies excluded; torch on the CPU slower than numpy. saxpy:
# the GPU 4x ahead alone, but its copies take 20x the CPU's time.
GPU_HOST = [
    timed_kernel("matmul", "cpu16", "numpy", 256, 1e-4),
    timed_kernel("matmul", "cpu16", "torch", 256, 2e-4),
    timed_kernel("matmul", "cuda1", "torch", 256, 4e-4, end_to_end=6e-4),
    timed_kernel("matmul", "cuda1", "cupy", 256, 5e-4, end_to_end=7e-4),
    timed_kernel("matmul", "cpu16", "numpy", 1024, 5e-3),
    timed_kernel("matmul", "cpu16", "torch", 1024, 6e-3),
    timed_kernel("matmul", "cuda1", "torch", 1024, 5e-4, end_to_end=1e-3),
    timed_kernel("matmul", "cuda1", "cupy", 1024, 6e-4, end_to_end=9e-4),
    timed_kernel("matmul", "cpu16", "numpy", 4096, 0.3),
    timed_kernel("matmul", "cuda1", "torch", 4096, 6e-3, end_to_end=1e-2),
    timed_kernel("saxpy", "cpu16", "numpy", 10**7, 4e-3),
    timed_kernel("saxpy", "cuda1", "torch", 10**7, 1e-3, end_to_end=8e-2),
]
