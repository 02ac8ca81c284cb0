"""Say why a Slurm batch failed: Snakemake 9 drops the message of a failed group job.

When sbatch refuses a submission, the Slurm plugin reports sbatch's own error
as the job's message. For a job group (the `kernels_{device}` batches)
Snakemake's GroupJob.log_error ignores that message and prints "message: None"
for every member, so the user learns only that the batch failed.
"""

from __future__ import annotations

import functools

from snakemake.jobs import GroupJob
from snakemake.logging import logger


def show_group_messages() -> None:
    """Print a failed group's message (once, above its members) before Snakemake's report."""
    original = GroupJob.log_error
    if getattr(original, "shows_message", False):
        return

    @functools.wraps(original)
    def log_error(self, msg=None, *args, **kwargs):
        if msg:
            logger.error(f"Error in group {self.groupid}: {msg}")
        return original(self, msg, *args, **kwargs)

    log_error.shows_message = True
    GroupJob.log_error = log_error
