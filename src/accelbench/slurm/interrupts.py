"""Ctrl-C on a Slurm run: the first one cancels the run's jobs, later ones cannot cut that short.

On SIGINT Snakemake cancels every running and queued job of the run (the
Slurm plugin's scancel). A second Ctrl-C while that is under way used to
interrupt it with a traceback and leave jobs in the queue, which then failed
to start. SIGQUIT (Ctrl-\\) still stops Snakemake at once.
"""

from __future__ import annotations

import signal
import sys

CANCELLING = (
    "Cancelling this run's Slurm jobs; wait for it to finish "
    "(Ctrl-\\ stops Snakemake at once and may leave jobs in the queue)."
)


def _note_cancelling(signum, frame) -> None:
    print(CANCELLING, file=sys.stderr, flush=True)


def _interrupt(signum, frame) -> None:
    signal.signal(signal.SIGINT, _note_cancelling)
    raise KeyboardInterrupt


def interrupt_once() -> None:
    """Let the first SIGINT interrupt as usual and turn later ones into a note."""
    signal.signal(signal.SIGINT, _interrupt)
