"""The targets a Snakemake run was asked for, seen while its Snakefile is read.

Snakemake builds its DAG from the targets only after the Snakefile is read, and
a target no rule makes then gets only "No rule to produce". The Snakefile can
refuse such a target itself, naming what is wrong with it (grid.check_targets),
if it knows the targets: Snakemake 9 reads the Snakefile when its DAG API is
made (DAGApi.__post_init__ asks for the workflow), before it hands the workflow
its DAG settings, which that API object already holds.
"""

from __future__ import annotations

import inspect

from snakemake.settings.types import DAGSettings


def requested() -> frozenset[str]:
    """The targets named on the command line (files and rules); empty where Snakemake was
    started another way, and the check of the targets is then Snakemake's own."""
    frame = inspect.currentframe()
    while frame is not None:
        settings = getattr(frame.f_locals.get("self"), "dag_settings", None)
        if isinstance(settings, DAGSettings):
            return frozenset(settings.targets)
        frame = frame.f_back
    return frozenset()
