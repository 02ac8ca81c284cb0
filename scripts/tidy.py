"""Rule entry point: all records -> tidy table, plus the lists of bad and excluded cells."""

import logging

import pandas as pd

from accelbench.analysis import tidy
from accelbench.platform.processes import die_with_parent

# Snakemake's own child: it must not outlive a Snakemake that was killed.
die_with_parent()

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)
log = logging.getLogger("tidy")

frame, problems = tidy.collect(snakemake.input)
frame = tidy.with_invalid_records(frame, problems)
tidy.write(frame, snakemake.output.parquet, snakemake.output.csv)
pd.DataFrame(problems, columns=["path", "problem"]).to_csv(
    snakemake.output.problems,
    index=False,
)
pd.DataFrame(snakemake.params.excluded, columns=["path", "reason"]).to_csv(
    snakemake.output.excluded,
    index=False,
)
for path, problem in problems:
    log.warning("invalid record %s: %s", path, problem)
log.info(
    "%d records, %d invalid, status counts: %s",
    len(frame),
    len(problems),
    frame["status"].value_counts().to_dict() if len(frame) else {},
)
