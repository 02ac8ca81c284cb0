"""Rule entry point: all records -> tidy table, plus the lists of bad and excluded cells."""

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))  # noqa: F821

import pandas as pd  # noqa: E402

from accelbench.analysis import tidy  # noqa: E402

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)  # noqa: F821
log = logging.getLogger("tidy")

frame, problems = tidy.collect(snakemake.input)  # noqa: F821
tidy.write(frame, snakemake.output.parquet, snakemake.output.csv)  # noqa: F821
pd.DataFrame(problems, columns=["path", "problem"]).to_csv(
    snakemake.output.problems, index=False  # noqa: F821
)
pd.DataFrame(snakemake.params.excluded, columns=["path", "reason"]).to_csv(  # noqa: F821
    snakemake.output.excluded, index=False  # noqa: F821
)
for path, problem in problems:
    log.warning("invalid record %s: %s", path, problem)
log.info("%d records, %d invalid, status counts: %s", len(frame), len(problems),
         frame["status"].value_counts().to_dict() if len(frame) else {})
