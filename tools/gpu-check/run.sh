#!/usr/bin/env bash
# The GPU acceptance check in one command on a GPU machine that has a PyTorch GPU image
# and no internet (README, "GPU acceptance"): installs what the image lacks from wheels
# carried in (tools/gpu-check/wheels.py made them), runs `make gpu-check`, and packs
# reference/<gpu>/ with the check's logs into one archive.
#
#   tools/gpu-check/run.sh [WHEELS] [ARCHIVE_DIR]
#
# WHEELS (default .whl): the carried wheels; without any, the project's own venv (make venv)
# must be there. ARCHIVE_DIR (default results/gpu-check-archive): where
# gpu-check-<gpu>.tar.gz goes; unpacked in a checkout (tar -xzf FILE), it restores
# reference/<gpu>/ and results/gpu-check-logs/. GPU_CHECK_BUDGET_S (default 560) stops the
# check that runs longer, so that what it made is still packed. Exits with the check's status.
set -uo pipefail
cd "$(dirname "$0")/../.."
wheels=${1:-.whl}
archive_dir=${2:-results/gpu-check-archive}
budget=${GPU_CHECK_BUDGET_S:-560}
logs=results/gpu-check-logs
mkdir -p "$archive_dir" "$logs"
started=$(date +%s)
say() { printf '[gpu-check %4ds] %s\n' $(($(date +%s) - started)) "$*" | tee -a "$logs/steps.txt"; }

# 1. What the image lacks, from the wheels (tools/gpu-check/install.sh).
if compgen -G "$wheels/*.whl" >/dev/null; then
    say "installing $(ls "$wheels"/*.whl | wc -l) carried wheels into .venv"
    tools/gpu-check/install.sh "$wheels" 2>&1 | tee -a "$logs/steps.txt"
    [ "${PIPESTATUS[0]}" = 0 ] || { say "installing failed"; exit 1; }
fi

# 2. The check itself, stopped at the budget (its jobs die with it).
say "make gpu-check (budget ${budget} s)"
timeout --signal=TERM --kill-after=20 "$budget" make gpu-check CUDA=13 2>&1 | tee "$logs/make.txt"
status=${PIPESTATUS[0]}
say "make gpu-check ended with status $status"

# 3. One archive: the reference (records, tables, figures, verdict) and the logs.
cp -r results/gpu-check "$logs/" 2>/dev/null
tar -czf "$logs/job-logs.tar.gz" results/logs .snakemake/log 2>/dev/null
reference=$(ls -dt reference/*/ 2>/dev/null | head -1)
gpu=$(basename "${reference:-no-reference}")
archive="$archive_dir/gpu-check-$gpu.tar.gz"
tar -czf "$archive" ${reference:+"$reference"} "$logs"
say "packed $archive ($(du -h "$archive" | cut -f1)): ${reference:-no reference/<gpu>/ was written}"
exit "$status"
