"""The human title of every table and figure, as the report lists them."""

from __future__ import annotations

TITLES = {
    "gpu_vs_cpu": "Does the GPU pay off? The GPU against the CPU of the same machine",
    "train_time_per_batch": "Time per mini-batch, by model and device",
    "train_speedup": "Training speedup over the baseline device",
    "train_precision": "Training time by precision",
    "train_scaling": "Training scaling efficiency",
    "train_thread_scaling": "Training time against CPU threads",
    "train_gpu_scaling": "Training scaling across GPUs",
    "train_node_scaling": "Training scaling across nodes",
    "train_energy": "Training time and energy per sample",
    "kernel_time": "Kernel time per call, by backend and device",
    "kernel_speedup": "Kernel speedup over the baseline device",
    "kernel_throughput": "Kernel throughput against problem size",
    "kernel_energy": "Kernel time and energy per call",
    "kernel_crossover": "Where the GPU overtakes the CPU",
    "kernel_crossovers": "Which side is ahead at each size, and the crossovers bracketed",
    "datasci_time": "Data science workload time, by size and device",
    "datasci_throughput": "Data science throughput against problem size",
    "datasci_energy": "Data science time and energy per call",
    "provenance": "Where and with what the records were measured",
    "config": "The configuration as run",
    "summary": "Summary of the run",
    "attention": "Cells that need attention, each with why",
}
