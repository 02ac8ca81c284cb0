"""Bad input the workflow refuses, by kind, with the words it must refuse it in.

Each message is checked in-process by the functions the workflow calls (tests/test_grid.py,
tests/test_config.py); tests/test_workflow.py runs one of each way through Snakemake.
"""

# Targets no grid can measure, by what is wrong, and what the workflow says of each.
# tests/test_grid.py checks each message; tests/test_workflow.py sees Snakemake refuse one
# of each way it finds them.
BAD_TARGETS = {
    "malformed device": (
        "results/kernels/matmul/gpu3/numpy/float64/n64.json",
        "device 'gpu3' is malformed",
    ),
    "unknown kernel": (
        "results/kernels/matmull/cpu1/numpy/float64/n64.json",
        "kernel 'matmull' is not known; allowed: fft1d, fft2d, mandelbrot, matmul",
    ),
    "unknown backend": (
        "results/kernels/matmul/cpu1/numpi/float64/n64.json",
        "backend 'numpi' is not known",
    ),
    "unknown dtype": (
        "results/kernels/matmul/cpu1/numpy/int8/n64.json",
        "dtype 'int8' is not known",
    ),
    "dtype the backend lacks": (
        "results/kernels/matmul/cpu1/numpy/float16/n64.json",
        "kernel 'matmul' on backend 'numpy' computes in float64, float32 only, not in float16",
    ),
    "GPU-only kernel on a CPU": (
        "results/kernels/transfer-h2d/cpu1/torch/float32/n64.json",
        "kernel 'transfer-h2d' runs on cuda devices only, not on cpu1",
    ),
    "unknown roof dtype": ("results/roofs/cpu1/float8.json", "dtype 'float8' is not known"),
    "malformed size": (
        "results/kernels/matmul/cpu1/numpy/float64/n6x4.json",
        "size '6x4' must be a positive",
    ),
    "CPU backend on a GPU": (
        "results/kernels/matmul/cuda1/numpy/float64/n64.json",
        "excluded from the grid: backend 'numpy' runs on cpu devices",
    ),
    "GPU precision on a CPU": (
        "results/train/resnet18/cpu1/tf32/single/bs16.json",
        "tf32 is a CUDA tensor-core mode",
    ),
    "zero batch": (
        "results/train/resnet18/cpu1/fp32/single/bs0.json",
        "batch size '0' must be a positive",
    ),
    "roof of two GPUs": (
        "results/roofs/cuda2/float32.json",
        "roofs bound kernels, which run on one node",
    ),
    "roof of two nodes": ("results/roofs/2x1cuda/float32.json", "2x1cuda spans 2 nodes"),
    "kernel on two GPU nodes": (
        "results/kernels/matmul/2x1cuda/cupy/float32/n64.json",
        "kernels run on one node",
    ),
    "kernel on two CPU nodes": (
        "results/kernels/matmul/2x2cpu/numpy/float32/n64.json",
        "2x2cpu spans 2",
    ),
    "file name of no record": (
        "results/kernels/matmul/cpu1/numpy/float32/16.json",
        "part 7, '16.json', must read 'n{size}.json'",
    ),
    "misspelt family": (
        "results/kernel/matmul/cpu1/numpy/float32/n16.json",
        "(did you mean 'kernels'?)",
    ),
}


# A config file's mistakes, by kind, and what the workflow's check says of each.
# tests/test_config.py checks each message; tests/test_workflow.py sees Snakemake stop on
# one of each check.
BAD_CONFIGS = {
    "unknown key": (
        "kernls: {}\n",
        "'kernls' is not one of ['seed', 'retries', 'cuda_stack', 'plugins', 'kernels', "
        "'datasci', 'train', 'contention', 'energy', 'resources', 'slurm', "
        "'cluster_analysis', 'report']",
    ),
    "unknown nested key": (
        "train:\n  stepz: 3\n",
        "'stepz' is not one of ['devices', 'precisions'",
    ),
    "unknown backend": (
        "kernels:\n  backends: [numpy, cuda-magic]\n",
        "config key kernels.backends: unknown backend 'cuda-magic'; allowed: numpy, numba",
    ),
    "unknown model": (
        "train:\n  batch_sizes:\n    vgg99: [8]\n",
        "config key train.batch_sizes: unknown model 'vgg99'; "
        "allowed: alexnet, alexnet-r, alexnet-s, autoencoder",
    ),
    "malformed device": ("kernels:\n  devices: [gpu0]\n", "'gpu0' does not match"),
    "unknown precision": (
        "train:\n  precisions: [fp8]\n",
        "'fp8' is not one of ['fp32', 'tf32', 'fp16', 'bf16'",
    ),
    "malformed baseline": ("report:\n  baseline_device: gpu1\n", "'gpu1' does not match"),
    "unknown figure width": (
        "report:\n  figure_width: wide\n",
        "'wide' is not one of ['auto', 'single', 'double']",
    ),
    "below its minimum": (
        "kernels:\n  runs: 2\n",
        "bad.yaml: config key kernels.runs: 2 is less than the minimum of 3",
    ),
}
