"""Roofline and offload: the kernels against the measured roofs (percent of roof, the
roofline figure), and the break-even model of offloading to a GPU beside the measured
crossover (the offload break-even table and figure). No grid of its own: it reads the
kernel, data science and roof records of whatever grid ran."""

from __future__ import annotations

TITLES = {
    "roofline": "Roofline of the measured roofs",
    "kernel_roof_percent": "Percent of the measured roof per kernel",
    "offload_break_even": "Offload break-even: when copying to the GPU pays",
}

# Output name -> whether the planned grid (fillable.Planned) fills it.
NEEDS = {
    "roofline": lambda plan, baseline: bool(plan.kernel_devices) and plan.roofs,
    "offload_break_even": lambda plan, baseline: plan.runs_on_cpu_and_gpu,
}
