"""One experiment job, from the rule's script to the record it leaves.

    scripts/run_experiment.py      the rule's script: the experiment its output path
          |                        names (grid.planned_experiment), its settings
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
    the family's measuring function (accelbench.families: kernels.measure.measure_kernel,
          |                        roofs.measure_roof, train.loop.measure_training, ...)
          v                        -> an outcome.Outcome per run, combined
    results.write_record           the record, written whole or not at all

`outcome` says what a measurement came to and which failures end an attempt;
`processes` ties every child to its parent, tells how it ended, asks a stuck one for its stacks.
"""
