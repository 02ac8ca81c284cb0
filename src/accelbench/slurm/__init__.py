"""Slurm: the resources a job asks for, the state of a run's jobs, a job group's errors and
interrupts. The sacct query of the queue-wait study is accelbench.studies.queue_wait.sacct."""
