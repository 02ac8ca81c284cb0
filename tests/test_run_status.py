"""accelbench status: the Slurm jobs of a workflow run, from squeue and sacct.

The captured outputs below are real, from the local Slurm 22.05 with
snakemake-executor-plugin-slurm 2.8.0, kept verbatim (hence the long lines):

- SQUEUE and SACCT: one moment of a Snakemake run in /tmp/rs_capture (run
  ee8617ad-...) with three jobs of rule `work`, a group job `batch` of two
  `grouped` jobs and a rule `bad` that exits 3, among other users' jobs;
  SACCT's Comment is empty, as on any site without AccountingStoreFlags=job_comment.
- SACCT_RETRIED: the batch run of tests/test_slurm.py, a group job of 8 kernels
  and 2 roofs, and a training job failing in attempt 1 and completing in attempt 2.
"""

# ruff: noqa: E501

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from accelbench import config as workflow_config
from accelbench import grid
from accelbench.run import config as run_config
from accelbench.slurm import run_status

SQUEUE = """\
189|CANCELLED|accelbench-sitecheck-probe|(null)|0:00|/tmp|JobHeldUser|/dev/null|
190|CANCELLED|accelbench-sitecheck-probe|(null)|0:00|/tmp|JobHeldUser|/dev/null|
191|CANCELLED|accelbench-sitecheck-probe|(null)|0:00|/tmp|JobHeldUser|/dev/null|
192|CANCELLED|accelbench-sitecheck-probe|(null)|0:00|/tmp|JobHeldUser|/dev/null|
194|FAILED|accelbench-sitecheck-probe|(null)|0:00|/tmp|BadConstraints|/dev/null|
195|FAILED|accelbench-sitecheck-probe|(null)|0:00|/tmp|BadConstraints|/dev/null|
196|FAILED|accelbench-sitecheck-probe|(null)|0:00|/tmp|BadConstraints|/dev/null|
197|FAILED|accelbench-sitecheck-probe|(null)|0:00|/tmp|BadConstraints|/dev/null|
199|COMPLETED|6f3a2e51-5b18-47ae-8504-48a738d370ed|rule_kernels_cpu1_kernel_benchmark|0:18|/tmp/pytest-of-root/pytest-45/test_configured_modules_are_lo0|None|/tmp/pytest-of-root/pytest-45/test_configured_modules_are_lo0/.snakemake/slurm_logs/group_kernels_cpu1_kernel_benchmark/%j.log|
201|COMPLETED|ee8617ad-473c-401e-a1ac-871893becc5b|rule_work_wildcards_b_1|0:14|/tmp/rs_capture|None|/tmp/rs_capture/.snakemake/slurm_logs/rule_work/b_1/%j.log|
198|FAILED|probe-uuid|rule_x_wildcards_a_b|0:00|/tmp/rs_probe|NonZeroExitCode|/tmp/rs_probe/logs/rule_x/a_b/%j.log|
202|PENDING|ee8617ad-473c-401e-a1ac-871893becc5b|rule_work_wildcards_a_1|0:00|/tmp/rs_capture|Resources|/tmp/rs_capture/.snakemake/slurm_logs/rule_work/a_1/%j.log|
203|PENDING|ee8617ad-473c-401e-a1ac-871893becc5b|rule_work_wildcards_c_1|0:00|/tmp/rs_capture|Priority|/tmp/rs_capture/.snakemake/slurm_logs/rule_work/c_1/%j.log|
204|PENDING|ee8617ad-473c-401e-a1ac-871893becc5b|rule_bad|0:00|/tmp/rs_capture|Priority|/tmp/rs_capture/.snakemake/slurm_logs/rule_bad/%j.log|
200|RUNNING|ee8617ad-473c-401e-a1ac-871893becc5b|rule_batch_grouped|0:01|/tmp/rs_capture|None|/tmp/rs_capture/.snakemake/slurm_logs/group_batch_grouped/%j.log|
"""

SACCT = """\
200|ee8617ad-473c-401e-a1ac-871893becc5b|RUNNING|00:00:01|/tmp/rs_capture||sbatch --parsable --job-name ee8617ad-473c-401e-a1ac-871893becc5b --output /tmp/rs_capture/.snakemake/slurm_logs/group_batch_grouped/%j.log --export=ALL --comment rule_batch_grouped -p medium -t 2 --mem 200 --ntasks=1 --cpus-per-task=2 -D /tmp/rs_capture --wrap=/work/main/.venv/bin/python -m snakemake --snakefile '/tmp/rs_capture/Snakefile' --target-jobs 'grouped:name=x' 'grouped:name=y' --allowed-rules grouped --local-groupid '29f0383e-8a1d-521c-9475-c975343d5484' --cores 'all' --attempt 1 --wait-for-files '/tmp/rs_capture/.snakemake/tmp.a6fki5w5' --force --target-files-omit-workdir-adjustment --max-inventory-time 0 --retries 0 --nocolor --no-hooks --nolock --ignore-incomplete --rerun-triggers mtime input code params software-env --conda-frontend 'conda' --shared-fs-usage storage-local-copies sources source-cache software-deployment software-deployment-cache input-output persistence --latency-wait 5 --scheduler 'ilp' --local-storage-prefix base64//LnNuYWtlbWFrZS9zdG9yYWdl --scheduler-solver-path '/work/main/.venv/bin' --runtime-source-cache-path '/root/.cache/snakemake/snakemake/source-cache/snakemake-runtime-cache/tmpznl5y8ad' --default-resources base64//dG1wZGlyPXN5c3RlbV90bXBkaXI= base64//bWVtX21iPTEwMA== base64//cnVudGltZT0y --executor slurm-jobstep --jobs 1 --mode 'remote'
201|ee8617ad-473c-401e-a1ac-871893becc5b|COMPLETED|00:00:14|/tmp/rs_capture||sbatch --parsable --job-name ee8617ad-473c-401e-a1ac-871893becc5b --output /tmp/rs_capture/.snakemake/slurm_logs/rule_work/b_1/%j.log --export=ALL --comment rule_work_wildcards_b_1 -p medium -t 2 --mem 100 --ntasks=1 --cpus-per-task=1 -D /tmp/rs_capture --wrap=/work/main/.venv/bin/python -m snakemake --snakefile '/tmp/rs_capture/Snakefile' --target-jobs 'work:sample=b,size=1' --allowed-rules work --cores 'all' --attempt 1 --force-use-threads  --wait-for-files '/tmp/rs_capture/.snakemake/tmp.a6fki5w5' --force --target-files-omit-workdir-adjustment --max-inventory-time 0 --retries 0 --nocolor --no-hooks --nolock --ignore-incomplete --rerun-triggers mtime input code params software-env --conda-frontend 'conda' --shared-fs-usage storage-local-copies sources source-cache software-deployment software-deployment-cache input-output persistence --latency-wait 5 --scheduler 'ilp' --local-storage-prefix base64//LnNuYWtlbWFrZS9zdG9yYWdl --scheduler-solver-path '/work/main/.venv/bin' --runtime-source-cache-path '/root/.cache/snakemake/snakemake/source-cache/snakemake-runtime-cache/tmpznl5y8ad' --default-resources base64//dG1wZGlyPXN5c3RlbV90bXBkaXI= base64//bWVtX21iPTEwMA== base64//cnVudGltZT0y --executor slurm-jobstep --jobs 1 --mode 'remote'
202|ee8617ad-473c-401e-a1ac-871893becc5b|PENDING|00:00:00|/tmp/rs_capture||sbatch --parsable --job-name ee8617ad-473c-401e-a1ac-871893becc5b --output /tmp/rs_capture/.snakemake/slurm_logs/rule_work/a_1/%j.log --export=ALL --comment rule_work_wildcards_a_1 -p medium -t 2 --mem 100 --ntasks=1 --cpus-per-task=1 -D /tmp/rs_capture --wrap=/work/main/.venv/bin/python -m snakemake --snakefile '/tmp/rs_capture/Snakefile' --target-jobs 'work:sample=a,size=1' --allowed-rules work --cores 'all' --attempt 1 --force-use-threads  --wait-for-files '/tmp/rs_capture/.snakemake/tmp.a6fki5w5' --force --target-files-omit-workdir-adjustment --max-inventory-time 0 --retries 0 --nocolor --no-hooks --nolock --ignore-incomplete --rerun-triggers mtime input code params software-env --conda-frontend 'conda' --shared-fs-usage storage-local-copies sources source-cache software-deployment software-deployment-cache input-output persistence --latency-wait 5 --scheduler 'ilp' --local-storage-prefix base64//LnNuYWtlbWFrZS9zdG9yYWdl --scheduler-solver-path '/work/main/.venv/bin' --runtime-source-cache-path '/root/.cache/snakemake/snakemake/source-cache/snakemake-runtime-cache/tmpznl5y8ad' --default-resources base64//dG1wZGlyPXN5c3RlbV90bXBkaXI= base64//bWVtX21iPTEwMA== base64//cnVudGltZT0y --executor slurm-jobstep --jobs 1 --mode 'remote'
203|ee8617ad-473c-401e-a1ac-871893becc5b|PENDING|00:00:00|/tmp/rs_capture||sbatch --parsable --job-name ee8617ad-473c-401e-a1ac-871893becc5b --output /tmp/rs_capture/.snakemake/slurm_logs/rule_work/c_1/%j.log --export=ALL --comment rule_work_wildcards_c_1 -p medium -t 2 --mem 100 --ntasks=1 --cpus-per-task=1 -D /tmp/rs_capture --wrap=/work/main/.venv/bin/python -m snakemake --snakefile '/tmp/rs_capture/Snakefile' --target-jobs 'work:sample=c,size=1' --allowed-rules work --cores 'all' --attempt 1 --force-use-threads  --wait-for-files '/tmp/rs_capture/.snakemake/tmp.a6fki5w5' --force --target-files-omit-workdir-adjustment --max-inventory-time 0 --retries 0 --nocolor --no-hooks --nolock --ignore-incomplete --rerun-triggers mtime input code params software-env --conda-frontend 'conda' --shared-fs-usage storage-local-copies sources source-cache software-deployment software-deployment-cache input-output persistence --latency-wait 5 --scheduler 'ilp' --local-storage-prefix base64//LnNuYWtlbWFrZS9zdG9yYWdl --scheduler-solver-path '/work/main/.venv/bin' --runtime-source-cache-path '/root/.cache/snakemake/snakemake/source-cache/snakemake-runtime-cache/tmpznl5y8ad' --default-resources base64//dG1wZGlyPXN5c3RlbV90bXBkaXI= base64//bWVtX21iPTEwMA== base64//cnVudGltZT0y --executor slurm-jobstep --jobs 1 --mode 'remote'
204|ee8617ad-473c-401e-a1ac-871893becc5b|PENDING|00:00:00|/tmp/rs_capture||sbatch --parsable --job-name ee8617ad-473c-401e-a1ac-871893becc5b --output /tmp/rs_capture/.snakemake/slurm_logs/rule_bad/%j.log --export=ALL --comment rule_bad -p medium -t 2 --mem 100 --ntasks=1 --cpus-per-task=1 -D /tmp/rs_capture --wrap=/work/main/.venv/bin/python -m snakemake --snakefile '/tmp/rs_capture/Snakefile' --target-jobs 'bad:' --allowed-rules bad --cores 'all' --attempt 1 --force-use-threads  --wait-for-files '/tmp/rs_capture/.snakemake/tmp.a6fki5w5' --force --target-files-omit-workdir-adjustment --max-inventory-time 0 --retries 0 --nocolor --no-hooks --nolock --ignore-incomplete --rerun-triggers mtime input code params software-env --conda-frontend 'conda' --shared-fs-usage storage-local-copies sources source-cache software-deployment software-deployment-cache input-output persistence --latency-wait 5 --scheduler 'ilp' --local-storage-prefix base64//LnNuYWtlbWFrZS9zdG9yYWdl --scheduler-solver-path '/work/main/.venv/bin' --runtime-source-cache-path '/root/.cache/snakemake/snakemake/source-cache/snakemake-runtime-cache/tmpznl5y8ad' --default-resources base64//dG1wZGlyPXN5c3RlbV90bXBkaXI= base64//bWVtX21iPTEwMA== base64//cnVudGltZT0y --executor slurm-jobstep --jobs 1 --mode 'remote'
"""

SACCT_RETRIED = """\
166|74e9209e-6bb2-4ee7-858f-513e84a6051f|FAILED|00:00:17|/tmp/pytest-of-root/pytest-40/batch0||sbatch --parsable --job-name 74e9209e-6bb2-4ee7-858f-513e84a6051f --output /tmp/pytest-of-root/pytest-40/batch0/.snakemake/slurm_logs/rule_train_benchmark/lstm_cpu1_fp32_single_4/%j.log --export=ALL --comment rule_train_benchmark_wildcards_lstm_cpu1_fp32_single_4 -p medium -t 5 --mem 2000 --ntasks=1 --cpus-per-task=1 -D /tmp/pytest-of-root/pytest-40/batch0 --wrap=/check/work/main/.venv/bin/python -m snakemake --snakefile '/tmp/pytest-of-root/pytest-40/batch0/Snakefile' --target-jobs 'train_benchmark:model=lstm,device=cpu1,precision=fp32,strategy=single,batch=4' --allowed-rules train_benchmark --cores 'all' --attempt 1 --force-use-threads  --wait-for-files '/tmp/pytest-of-root/pytest-40/batch0/.snakemake/tmp.8er_v39m' --force --target-files-omit-workdir-adjustment --max-inventory-time 0 --retries 0 --nocolor --no-hooks --nolock --ignore-incomplete --rerun-triggers input params mtime code software-env --conda-frontend 'conda' --shared-fs-usage sources software-deployment software-deployment-cache persistence storage-local-copies input-output source-cache --latency-wait 60 --scheduler 'greedy' --local-storage-prefix base64//LnNuYWtlbWFrZS9zdG9yYWdl --scheduler-solver-path '/check/work/main/.venv/bin' --runtime-source-cache-path '/root/.cache/snakemake/snakemake/source-cache/snakemake-runtime-cache/tmpaeqos0uh' --set-resource-scopes 'benchmark_slots=local' --configfiles /tmp/pytest-of-root/pytest-40/batch0/config/batch.yaml --default-resources base64//dG1wZGlyPXN5c3RlbV90bXBkaXI= --executor slurm-jobstep --jobs 1 --mode 'remote'
167|74e9209e-6bb2-4ee7-858f-513e84a6051f|COMPLETED|00:01:36|/tmp/pytest-of-root/pytest-40/batch0||sbatch --parsable --job-name 74e9209e-6bb2-4ee7-858f-513e84a6051f --output /tmp/pytest-of-root/pytest-40/batch0/.snakemake/slurm_logs/group_kernels_cpu1_kernel_benchmark_roof_benchmark/%j.log --export=ALL --comment rule_kernels_cpu1_kernel_benchmark_roof_benchmark -p medium -t 50 --mem 1000 --ntasks=1 --cpus-per-task=1 -D /tmp/pytest-of-root/pytest-40/batch0 --wrap=/check/work/main/.venv/bin/python -m snakemake --snakefile '/tmp/pytest-of-root/pytest-40/batch0/Snakefile' --target-jobs 'kernel_benchmark:kernel=matmul,device=cpu1,backend=numpy,dtype=float32,size=8' 'kernel_benchmark:kernel=matmul,device=cpu1,backend=torch,dtype=float64,size=16' 'kernel_benchmark:kernel=matmul,device=cpu1,backend=torch,dtype=float32,size=16' 'roof_benchmark:device=cpu1,dtype=float64' 'kernel_benchmark:kernel=matmul,device=cpu1,backend=numpy,dtype=float64,size=16' 'kernel_benchmark:kernel=matmul,device=cpu1,backend=numpy,dtype=float32,size=16' 'kernel_benchmark:kernel=matmul,device=cpu1,backend=torch,dtype=float32,size=8' 'kernel_benchmark:kernel=matmul,device=cpu1,backend=torch,dtype=float64,size=8' 'kernel_benchmark:kernel=matmul,device=cpu1,backend=numpy,dtype=float64,size=8' 'roof_benchmark:device=cpu1,dtype=float32' --allowed-rules roof_benchmark kernel_benchmark --local-groupid 'c39dc9c0-92f9-5805-a793-30053a4281ae' --cores 'all' --attempt 1 --wait-for-files '/tmp/pytest-of-root/pytest-40/batch0/.snakemake/tmp.8er_v39m' --force --target-files-omit-workdir-adjustment --max-inventory-time 0 --retries 0 --nocolor --no-hooks --nolock --ignore-incomplete --rerun-triggers input params mtime code software-env --conda-frontend 'conda' --shared-fs-usage sources software-deployment software-deployment-cache persistence storage-local-copies input-output source-cache --latency-wait 60 --scheduler 'greedy' --local-storage-prefix base64//LnNuYWtlbWFrZS9zdG9yYWdl --scheduler-solver-path '/check/work/main/.venv/bin' --runtime-source-cache-path '/root/.cache/snakemake/snakemake/source-cache/snakemake-runtime-cache/tmpaeqos0uh' --set-resource-scopes 'benchmark_slots=local' --configfiles /tmp/pytest-of-root/pytest-40/batch0/config/batch.yaml --default-resources base64//dG1wZGlyPXN5c3RlbV90bXBkaXI= --executor slurm-jobstep --jobs 1 --mode 'remote'
168|74e9209e-6bb2-4ee7-858f-513e84a6051f|COMPLETED|00:00:16|/tmp/pytest-of-root/pytest-40/batch0||sbatch --parsable --job-name 74e9209e-6bb2-4ee7-858f-513e84a6051f --output /tmp/pytest-of-root/pytest-40/batch0/.snakemake/slurm_logs/rule_train_benchmark/lstm_cpu1_fp32_single_4/%j.log --export=ALL --comment rule_train_benchmark_wildcards_lstm_cpu1_fp32_single_4 -p medium -t 10 --mem 4000 --ntasks=1 --cpus-per-task=1 -D /tmp/pytest-of-root/pytest-40/batch0 --wrap=/check/work/main/.venv/bin/python -m snakemake --snakefile '/tmp/pytest-of-root/pytest-40/batch0/Snakefile' --target-jobs 'train_benchmark:model=lstm,device=cpu1,precision=fp32,strategy=single,batch=4' --allowed-rules train_benchmark --cores 'all' --attempt 2 --force-use-threads  --wait-for-files '/tmp/pytest-of-root/pytest-40/batch0/.snakemake/tmp.8er_v39m' --force --target-files-omit-workdir-adjustment --max-inventory-time 0 --retries 0 --nocolor --no-hooks --nolock --ignore-incomplete --rerun-triggers input params mtime code software-env --conda-frontend 'conda' --shared-fs-usage sources software-deployment software-deployment-cache persistence storage-local-copies input-output source-cache --latency-wait 60 --scheduler 'greedy' --local-storage-prefix base64//LnNuYWtlbWFrZS9zdG9yYWdl --scheduler-solver-path '/check/work/main/.venv/bin' --runtime-source-cache-path '/root/.cache/snakemake/snakemake/source-cache/snakemake-runtime-cache/tmpaeqos0uh' --set-resource-scopes 'benchmark_slots=local' --configfiles /tmp/pytest-of-root/pytest-40/batch0/config/batch.yaml --default-resources base64//dG1wZGlyPXN5c3RlbV90bXBkaXI= --executor slurm-jobstep --jobs 1 --mode 'remote'
"""

RUN = "ee8617ad-473c-401e-a1ac-871893becc5b"
CAPTURE_DIR = "/tmp/rs_capture"
LOGS = f"{CAPTURE_DIR}/.snakemake/slurm_logs"
RETRIED_DIR = "/tmp/pytest-of-root/pytest-40/batch0"


def by_id(jobs: list[run_status.SlurmJob]) -> dict[str, run_status.SlurmJob]:
    return {job.job_id: job for job in jobs}


def captured_run() -> list[run_status.SlurmJob]:
    jobs = run_status.merge(run_status.parse_squeue(SQUEUE), run_status.parse_sacct(SACCT))
    return run_status.select(jobs, CAPTURE_DIR, RUN)


def test_squeue_rows_name_rule_wildcards_group_and_log():
    jobs = by_id(run_status.parse_squeue(SQUEUE))
    assert len(jobs) == 15
    pending = jobs["202"]
    assert (pending.state, pending.category, pending.reason) == ("PENDING", "pending", "Resources")
    assert (pending.name, pending.is_group, pending.experiments) == ("work", False, ["work a_1"])
    assert pending.log == f"{LOGS}/rule_work/a_1/202.log"
    group = jobs["200"]
    assert (group.category, group.is_group, group.name) == ("running", True, "group batch_grouped")
    assert group.log == f"{LOGS}/group_batch_grouped/200.log"
    assert group.reason == ""  # squeue's "None"
    assert jobs["189"].comment == "" and jobs["189"].log == "/dev/null"


def test_sacct_submit_line_names_every_experiment_of_a_group():
    jobs = by_id(run_status.parse_sacct(SACCT_RETRIED))
    group = jobs["167"]
    assert group.name == "group kernels_cpu1"
    assert group.comment == "rule_kernels_cpu1_kernel_benchmark_roof_benchmark"
    assert group.attempt == 1
    assert len(group.experiments) == 10
    assert group.experiments[:4] == [
        "kernels/matmul/cpu1/numpy/float32/n8",
        "kernels/matmul/cpu1/torch/float64/n16",
        "kernels/matmul/cpu1/torch/float32/n16",
        "roofs/cpu1/float64",
    ]
    assert group.log == (
        f"{RETRIED_DIR}/.snakemake/slurm_logs/"
        "group_kernels_cpu1_kernel_benchmark_roof_benchmark/167.log"
    )
    retry = jobs["168"]
    assert (retry.attempt, retry.experiments) == (2, ["train/lstm/cpu1/fp32/single/bs4"])
    assert retry.targets[0].wildcards[0] == ("model", "lstm")


def test_run_and_directory_select_the_jobs_of_one_workflow():
    jobs = captured_run()
    assert [job.job_id for job in jobs] == ["200", "201", "202", "203", "204"]
    assert run_status.select(jobs, "/tmp", RUN) == []
    assert run_status.latest_run(run_status.parse_squeue(SQUEUE)) == RUN  # job 204


def test_merge_keeps_the_live_state_and_the_accounted_experiments():
    jobs = by_id(captured_run())
    assert jobs["200"].elapsed == "0:01"  # squeue's
    assert jobs["200"].experiments == ["grouped name=x", "grouped name=y"]  # sacct's
    assert jobs["202"].reason == "Resources"
    # A job sacct does not know yet keeps what squeue says, its comment's wildcards.
    lagging = run_status.merge(run_status.parse_squeue(SQUEUE), [])
    assert by_id(lagging)["202"].experiments == ["work a_1"]
    assert by_id(lagging)["200"].experiments == []


def test_summary_counts_jobs_and_experiments_by_rule():
    summary = run_status.summarise(captured_run())
    assert run_status.format_counts(summary.jobs) == "3 pending, 1 running, 1 completed"
    assert {rule: run_status.format_counts(counts) for rule, counts in summary.by_rule.items()} == {
        "grouped": "2 running",
        "work": "2 pending, 1 completed",
        "bad": "1 pending",
    }


def test_a_resubmitted_job_counts_once_and_its_failed_attempt_is_listed():
    jobs = run_status.parse_sacct(SACCT_RETRIED)
    current, earlier = run_status.latest_attempts(jobs)
    assert [job.job_id for job in current] == ["167", "168"]
    assert [job.job_id for job in earlier] == ["166"]
    report = run_status.render(jobs, RETRIED_DIR, "74e9209e-6bb2-4ee7-858f-513e84a6051f")
    assert "2 Slurm jobs: 2 completed" in report
    assert "Jobs not completed" not in report
    assert (
        "Earlier attempts, resubmitted (1):\n  job 166  failed 00:00:17  train_benchmark\n"
        in report
    )
    assert "      train/lstm/cpu1/fp32/single/bs4\n" in report


def test_report_lists_unfinished_jobs_with_experiments_and_logs():
    report = run_status.render(captured_run(), CAPTURE_DIR, RUN)
    assert report.startswith(
        f"Run {RUN} in {CAPTURE_DIR}\n5 Slurm jobs: 3 pending, 1 running, 1 completed\n"
    )
    assert (
        "  job 200  running 0:01  group batch (2 experiments)\n"
        "      grouped name=x\n"
        "      grouped name=y\n" in report
    )
    assert "  job 202  pending (Resources)  work\n      work sample=a size=1\n" in report
    assert f"      log: {LOGS}/rule_work/a_1/202.log" in report
    assert "job 201" not in report  # completed
    # Problems first, then running, then pending.
    assert report.index("job 200") < report.index("job 202") < report.index("job 204")
    everything = run_status.render(captured_run(), CAPTURE_DIR, RUN, everything=True)
    assert "  job 201  completed 0:14  work\n" in everything


def test_log_notes_say_why_a_log_is_absent(tmp_path):
    job = by_id(captured_run())["202"]
    log = tmp_path / "202.log"
    assert run_status._log_note(replace(job, log=str(log))).endswith("(not written yet)")
    done = replace(job, state="COMPLETED", log=str(log))
    assert run_status._log_note(done).endswith("(deleted after success)")
    assert "slurm-keep-successful-logs" in run_status.render([done], tmp_path, RUN, everything=True)
    log.write_text("")
    assert run_status._log_note(done) == str(log)


@pytest.mark.parametrize(
    ("state", "category"),
    [
        ("PENDING", "pending"),
        ("REQUEUED", "pending"),
        ("COMPLETING", "running"),
        ("COMPLETED", "completed"),
        ("FAILED", "failed"),
        ("NODE_FAIL", "failed"),
        ("PREEMPTED", "failed"),
        ("TIMEOUT", "timeout"),
        ("OUT_OF_MEMORY", "out of memory"),
        ("CANCELLED by 0", "cancelled"),
    ],
)
def test_slurm_states_fall_into_categories(state, category):
    line = f"7|{RUN}|{state}|00:00:01|/w||sbatch --comment rule_a --output /w/%j.log --wrap=true"
    (job,) = run_status.parse_sacct(line)
    assert job.category == category
    assert job.log == "/w/7.log"


def test_targets_with_quoted_commas_and_array_logs():
    targets, attempt = run_status.parse_targets(
        """snakemake --target-jobs 'a:k=x,j="b,c"' 'b:' --attempt 3 --cores 'all'"""
    )
    assert targets == (
        run_status.Target("a", (("k", "x"), ("j", "b,c"))),
        run_status.Target("b", ()),
    )
    assert attempt == 3
    assert run_status._expand_log("logs/%A_%a.log", "12_3", "/w") == "/w/logs/12_3.log"


def test_run_id_comes_from_the_newest_snakemake_log_that_used_slurm(tmp_path):
    logs = tmp_path / ".snakemake" / "log"
    logs.mkdir(parents=True)
    (logs / "2026-01-01T100000.000000.snakemake.log").write_text("SLURM run ID: old-run\n")
    (logs / "2026-01-02T100000.000000.snakemake.log").write_text("SLURM run ID: new-run\n")
    (logs / "2026-01-03T100000.000000.snakemake.log").write_text("local run, no Slurm\n")
    assert run_status.find_run(tmp_path) == "new-run"
    assert run_status.find_run(tmp_path / "elsewhere") is None


def test_queries_filter_by_run_name():
    squeue = run_status.squeue_command(RUN)
    assert squeue[:4] == ["squeue", "--me", "--noheader", "--states=all"]
    assert squeue[-2:] == ["--name", RUN]
    assert "JobID:|,State:|" in squeue[4]
    sacct = run_status.sacct_command(None, 2, now=datetime(2026, 3, 10, 12, 30))
    assert "--starttime=2026-03-08T12:30" in sacct
    assert "--name" not in sacct


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="accelbench")
    run_status.add_command(parser.add_subparsers(dest="command", required=True))
    return parser


def test_status_command_options():
    args = parser().parse_args(["status", "--directory", "w", "--run", RUN, "--all"])
    assert (args.directory, args.run, args.all, args.days) == (Path("w"), RUN, True, 7)
    assert args.handler is run_status.command_status
    assert parser().parse_args(["status"]).directory == Path(".")


def test_status_elsewhere_says_where_it_looked_and_what_it_expected(tmp_path, monkeypatch, capsys):
    """Not a workflow directory: no Snakefile, no run config, no Slurm job from there."""
    monkeypatch.setattr(run_status, "_query", lambda command: "")  # Slurm answers: no jobs
    args = parser().parse_args(["status", "--directory", str(tmp_path)])
    assert args.handler(args) == 2
    said = capsys.readouterr().err
    assert said.startswith(f"accelbench: no run found in {os.path.realpath(tmp_path)}: ")
    assert "no results/logs/run_config.yaml (written when a run starts)" in said
    assert "no 'SLURM run ID' in .snakemake/log/" in said
    assert "squeue and sacct (last 7 days) list no job started there" in said
    assert "Run accelbench status in the directory you ran snakemake in" in said
    # A checkout where no run has started yet, on a machine without Slurm: said, not an error.
    (tmp_path / "Snakefile").write_text("")
    monkeypatch.setattr(run_status, "_query", lambda command: None)
    assert args.handler(args) == 0
    assert capsys.readouterr().out.startswith(
        f"No run has started in {os.path.realpath(tmp_path)} yet: "
    )


def test_watch_shows_the_grid_by_family_and_partition_until_it_is_done(
    tmp_path, monkeypatch, capsys
):
    """A local run: no Slurm, the grid from the config the run wrote when it started; each
    look reads the records written since, and the last one ends the watch."""
    config = workflow_config.load()
    run_config.write(config, [], tmp_path)
    (tmp_path / ".snakemake" / "locks").mkdir(parents=True)
    (tmp_path / ".snakemake" / "locks" / "0.input.lock").write_text("")
    experiments = grid.expand(config).experiments
    start = datetime.now(UTC) - timedelta(days=1)  # measured before this run

    def measure(exp, seconds=2.0):
        record = tmp_path / exp.path
        record.parent.mkdir(parents=True, exist_ok=True)
        finished = (start + timedelta(seconds=seconds)).isoformat()
        provenance = {"started": start.isoformat(), "finished": finished}
        record.write_text(json.dumps({"status": "ok", "provenance": provenance}))

    for exp in experiments[:-1]:
        measure(exp)
    looks = []

    def the_last_one_is_measured_meanwhile(seconds):
        looks.append(seconds)
        measure(experiments[-1])

    monkeypatch.setattr(run_status, "_query", lambda command: None)
    monkeypatch.setattr(run_status.time, "sleep", the_last_one_is_measured_meanwhile)
    args = parser().parse_args(["status", "--directory", str(tmp_path), "--watch", "5"])
    assert args.handler(args) == 0
    assert looks == [5.0]
    first, second = capsys.readouterr().out.split(", every 5 s (Ctrl-C stops):\n")[1:]
    total = len(experiments)
    assert first.startswith(
        "Progress of the grid of results/logs/run_config.yaml, the config of the run last "
        f"started here:\n{total - 1} of {total} experiments have a record\n"
        "  family   partition  done  planned  median wall  left\n"
    )
    families = {exp.family for exp in experiments}
    for family in families:
        planned = sum(exp.family == family for exp in experiments)
        assert re.search(rf"^  {family} +medium +\d+ +{planned} +2 s", first, re.MULTILINE)
    assert re.search(r"^ETA: about \d+ s, one experiment at a time", first, re.MULTILINE)
    assert second.endswith("Every experiment of the grid has its record.\n")
    assert "Slurm" not in first + second

    # Without --watch one look, and --watch takes only a positive number of seconds.
    args = parser().parse_args(["status", "--directory", str(tmp_path)])
    assert args.handler(args) == 0
    assert capsys.readouterr().out.startswith("Progress of the grid of")
    with pytest.raises(SystemExit):
        parser().parse_args(["status", "--watch", "0"])


# A real run's conventions, as snakemake-executor-plugin-slurm submits: the run
# UUID as job name, rule/group and wildcards in the comment, the log under
# .snakemake/slurm_logs, -D the workflow and the experiments in the --wrap command.
GROUP_TARGETS = (
    "'kernel_benchmark:kernel=matmul,device=cpu1,backend=numpy,dtype=float64,size=32' "
    "'roof_benchmark:device=cpu1,dtype=float64'"
)
TRAIN_TARGET = "'train_benchmark:model=fcn,device=cpu1,precision=fp32,strategy=single,batch=2'"
HELD_TARGET = "'kernel_benchmark:kernel=saxpy,device=cpu1,backend=numpy,dtype=float64,size=1000'"


def sbatch(directory: Path, run: str, comment: str, log_dir: str, command: str, *extra: str) -> str:
    log = directory / ".snakemake" / "slurm_logs" / log_dir / "%j.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    call = [
        "sbatch", "--parsable", "--job-name", run, "--output", str(log), "--export=ALL",
        "--comment", comment, "-p", "medium", "-t", "1", "--mem", "100", "--ntasks=1",
        "--cpus-per-task=1", "-D", str(directory), *extra, f"--wrap={command}",
    ]  # fmt: skip
    done = subprocess.run(call, capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.strip().split(";")[0]


@pytest.mark.slurm
def test_status_of_real_jobs(slurm, tmp_path, capsys):
    directory = Path(os.path.realpath(tmp_path / "workflow"))
    other = Path(os.path.realpath(tmp_path / "other"))
    other.mkdir(parents=True)
    run = str(uuid.uuid4())
    logs = directory / ".snakemake" / "log"
    logs.mkdir(parents=True)
    (logs / "2026-01-01T000000.000000.snakemake.log").write_text(f"SLURM run ID: {run}\n")
    group = "kernels_cpu1_kernel_benchmark_roof_benchmark"
    train = "train_benchmark/fcn_cpu1_fp32_single_2"
    held = []
    try:
        done = sbatch(
            directory,
            run,
            f"rule_{group}",
            f"group_{group}",
            f"true --target-jobs {GROUP_TARGETS} --attempt 1",
        )
        failed = sbatch(
            directory,
            run,
            "rule_train_benchmark_wildcards_fcn_cpu1_fp32_single_2",
            f"rule_{train}",
            f"false --target-jobs {TRAIN_TARGET} --attempt 2",
        )
        for where in (directory, other):
            held.append(
                sbatch(
                    where,
                    run,
                    "rule_kernel_benchmark_wildcards_saxpy_cpu1_numpy_float64_1000",
                    "rule_kernel_benchmark/saxpy_cpu1_numpy_float64_1000",
                    f"true --target-jobs {HELD_TARGET} --attempt 1",
                    "--hold",
                )
            )
        deadline = time.monotonic() + 120
        while True:
            jobs = by_id(run_status.collect(directory, run))
            states = {job_id: jobs[job_id].category for job_id in jobs}
            finished = states.get(done) == "completed" and states.get(failed) == "failed"
            if (finished and jobs[done].targets) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert states == {done: "completed", failed: "failed", held[0]: "pending"}

        args = parser().parse_args(["status", "--directory", str(directory)])
        assert args.handler(args) == 0
        report = capsys.readouterr().out
    finally:
        subprocess.run(["scancel", *held], check=False)

    assert report.startswith(
        f"Run {run} in {directory}\n3 Slurm jobs: 1 pending, 1 completed, 1 failed\n"
    )
    assert re.search(r"kernel_benchmark +1 pending, 1 completed\n", report)
    assert re.search(r"roof_benchmark +1 completed\n", report)
    assert re.search(r"train_benchmark +1 failed\n", report)
    failed_log = directory / ".snakemake" / "slurm_logs" / f"rule_{train}" / f"{failed}.log"
    assert failed_log.exists()
    assert re.search(
        rf"  job {failed}  failed \S+  train_benchmark \(attempt 2\)\n"
        rf"      train/fcn/cpu1/fp32/single/bs2\n      log: {re.escape(str(failed_log))}\n",
        report,
    )
    # A held job is not in sacct: its experiments come from its batch script.
    assert (
        f"  job {held[0]}  pending (JobHeldUser)  kernel_benchmark\n"
        "      kernels/saxpy/cpu1/numpy/float64/n1000\n"
        "      log: "
    ) in report
    assert "(not written yet)" in report
    assert f"job {done}" not in report and f"job {held[1]}" not in report

    args = parser().parse_args(["status", "--directory", str(directory), "--run", run, "--all"])
    assert args.handler(args) == 0
    everything = capsys.readouterr().out
    assert f"  job {done}  completed " in everything
    assert (
        "group kernels_cpu1 (2 experiments)\n"
        "      kernels/matmul/cpu1/numpy/float64/n32\n"
        "      roofs/cpu1/float64\n" in everything
    )
