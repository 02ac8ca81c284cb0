"""Shi et al. (2016): the seven networks of "Benchmarking State-of-the-Art Deep Learning
Software Tools" at the paper's batch sizes, their time per mini-batch and thread scaling
beside the paper's Table 7 (results/tables/shi2016_comparison.*,
results/figures/shi2016_{comparison,scaling}.*). Its grid: config.yaml here."""

from __future__ import annotations

from accelbench.studies.shi2016 import paper

TITLES = {
    "shi2016_comparison": "Time per mini-batch beside Shi et al. (2016)",
    "shi2016_scaling": "CPU thread scaling beside Shi et al. (2016)",
}

# Output name -> whether the planned grid (fillable.Planned) fills it.
NEEDS = {
    "shi2016_comparison": lambda plan, baseline: paper.planned(plan.train_configurations),
}
