"""One experiment job, from the rule's script to the record it leaves.

    scripts/run_experiment.py      the rule's script: the experiment its output path
          |                        names (grid.planned_experiment), its settings read
          |                        back from the rule's params (the family's settings_type),
          |                        the job's context (job.context: config digest, plugins)
          v
    supervisor.run_supervised      time limit, retry decision, the outcome of a
          |                        process that died without a record
          |  locally: asks the fork server   on Slurm: srun, one per task
          v
    fork_server                    one per local run, torch/Numba/the measuring
          |                        code imported once; forks each job's
          v                        measuring process
    measuring_process.main         this job's process: has measured nothing yet
          |
          v
    measurement.run                runs until the interval is tight
          |                        (accelbench.measuring.precision), under the contention
          |                        watch, each run forked afresh
          v
    the family's measuring function (its declaration's `measure`:
          |                        kernels.measure.measure_kernel, roofs.measure.measure_roof,
          |                        train.loop.measure_training, ...)
          v                        -> a measuring.outcome.Outcome per run, combined
    records.record.write_record    the record, written whole or not at all

The job chain knows no family: what differs between them, it asks the experiment's
declaration (accelbench.families.base.family_of: its hooks, imported by name where a
run measures), and it imports no family's declaration or measuring code
(tests/test_package_layout.py). accelbench.measuring.outcome says what a measurement
came to and which failures end an attempt; accelbench.measuring.settings, what the chain
reads of any family's settings, handed down unchanged (a change is a dataclasses.replace);
accelbench.platform.processes ties every child to its parent, tells how it ended, asks a
stuck one for its stacks.
"""
