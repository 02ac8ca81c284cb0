"""Slurm: the resources a job asks for, the state of a run's jobs, a job group's errors,
interrupts, and the sacct query."""
