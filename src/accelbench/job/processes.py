"""Moved to accelbench.platform.processes; this name is kept for the workflow's scripts
that still import die_with_parent from here (the study rules' scripts)."""

from accelbench.platform.processes import die_with_parent

__all__ = ["die_with_parent"]
