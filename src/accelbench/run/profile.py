"""Whether a run has the project's settings, and a warning no one can miss when not.

Snakemake loads `profiles/default` by itself, so `snakemake --cores N` and
`snakemake --executor slurm` get the settings that keep timings honest and
submissions few. `--workflow-profile none`, or a profile of one's own, drops
them silently; a run then still works, but measures or submits differently.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

KERNEL_GROUP = "kernels_{device}"


def missing_settings(
    *,
    executor: str,
    resources: Collection[str],
    group_components: Mapping[str, int],
    keep_going: bool,
) -> list[str]:
    """What the run lacks of profiles/default, each with what it costs."""
    missing = []
    if "benchmark_slots" not in resources:
        missing.append(
            "resources benchmark_slots=1: experiments run side by side on one machine "
            "and disturb each other's timings"
        )
    if executor == "slurm" and group_components.get(KERNEL_GROUP, 1) <= 1:
        missing.append(
            f"group-components {KERNEL_GROUP}=25: every kernel experiment and roof "
            "becomes a Slurm submission of its own"
        )
    if not keep_going:
        missing.append("keep-going: the first failing experiment stops the whole run")
    return missing


def warning(missing: list[str]) -> str:
    """A banner naming the missing settings and how to get them back ('' if none)."""
    if not missing:
        return ""
    rule = "=" * 78
    lines = [
        rule,
        "WARNING: this run does not use the project's settings (profiles/default):",
        *(f"  - {item}" for item in missing),
        "Snakemake loads profiles/default unless --workflow-profile names another one",
        "(or 'none'); give those settings on the command line or in your profile.",
        rule,
    ]
    return "\n".join(lines)
