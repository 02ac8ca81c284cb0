"""Rule entry point: sacct dump -> queue-wait tables and figure, parsed jobs, unreadable lines."""

import logging
from pathlib import Path

from accelbench.analysis import style
from accelbench.platform.processes import die_with_parent
from accelbench.studies.queue_wait import sacct
from accelbench.studies.queue_wait import wait as queue_wait

# Snakemake's own child: it must not outlive a Snakemake that was killed.
die_with_parent()

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)
log = logging.getLogger("queue_wait")

params = snakemake.params
parsed = sacct.read(snakemake.input[0])
for number, line, problem in parsed.problems:
    log.warning("line %d unreadable (%s): %s", number, problem, line)
log.info("%s", parsed.summary())
notes = queue_wait.data_notes(parsed, snakemake.input[0], params.partitions)
notes.append(queue_wait.FORECAST_METHOD.format(min_jobs=params.min_jobs))
binnings = (
    ("cpu_hours", params.cpu_hour_bins, snakemake.output.cpu_hours_table),
    ("gb_hours", params.gb_hour_bins, snakemake.output.gb_hours_table),
)
summaries = []
for dimension, edges, table in binnings:
    summaries.append(queue_wait.summarise(parsed.jobs, dimension, edges, params.partitions))
    queue_wait.write_table(summaries[-1], Path(table[0]).with_suffix(""), notes)
style.save(queue_wait.figure(summaries), Path(snakemake.output.figure_pdf).with_suffix(""))
parsed.jobs.to_csv(snakemake.output.jobs, index=False)
parsed.problems_frame().to_csv(snakemake.output.problems, index=False)
