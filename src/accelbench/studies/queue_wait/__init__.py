"""Queue wait: how long jobs wait in each Slurm partition, binned by the size of their
request, from sacct accounting data (results/tables/queue_wait_{cpu,gb}_hours.*,
results/figures/queue_wait.*), and `accelbench advise`, which ranks where to run by the
expected time to result. No grid of its own: the settings are the main config's
`cluster_analysis` section; its outputs join the default target with
`cluster_analysis.queue_wait: true`."""

from __future__ import annotations

TITLES = {"queue_wait": "Queue wait per partition"}
