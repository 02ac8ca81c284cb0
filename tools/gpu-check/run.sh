#!/usr/bin/env bash
# The GPU acceptance check in one command on a GPU machine that has a PyTorch GPU image
# and no internet (docs/gpu-acceptance.md): installs what the image lacks from wheels
# carried in (tools/gpu-check/wheels.py made them), runs `make gpu-check`, launches the
# local DDP cells over and over beside CPU load on that big host (benchmarks/ddp_stress.py,
# where a launch once hung), runs the GPU tests where asked (GPU_TESTS_S), and packs
# reference/<gpu>/ with the logs into one archive.
#
#   tools/gpu-check/run.sh [WHEELS] [ARCHIVE_DIR]
#
# WHEELS (default .whl): the carried wheels; without any, the project's own venv (make venv)
# must be there. ARCHIVE_DIR (default results/gpu-check-archive): where
# gpu-check-<gpu>.tar.gz goes; unpacked in a checkout (tar -xzf FILE), it restores
# reference/<gpu>/ and results/gpu-check-logs/. BUDGET_S (default 570): the seconds it all
# may take, so that what was made is still packed; the check gets what the install, the
# stress (DDP_STRESS_S, default 30, at most DDP_STRESS_LAUNCHES launches, default 60,
# each a hang after DDP_STRESS_DEADLINE s, default 20) and the GPU tests (GPU_TESTS_S,
# default 0: not run; else `make gpu-tests`, stopped after that many s) leave. A check
# that runs out of time (stopped with TERM, then KILL after STOP_GRACE_S, default 15) is
# judged on the records it made (make gpu-verdict). RESUME=1, on the same machine, goes on
# from such a check: the install, a doctor that passed and a stress that ended are not
# done again, the records made are kept and the rest measured.
# Exits with the check's status.
set -uo pipefail
cd "$(dirname "$0")/../.."
wheels=${1:-.whl}
archive_dir=${2:-results/gpu-check-archive}
budget=${BUDGET_S:-570}
stress_s=${DDP_STRESS_S:-30}
tests_s=${GPU_TESTS_S:-0}
deadline=${DDP_STRESS_DEADLINE:-20}
grace=${STOP_GRACE_S:-15}
resume=${RESUME:-}
logs=results/gpu-check-logs
[ -n "$resume" ] || rm -rf "$logs"
mkdir -p "$archive_dir" "$logs"
started=$(date +%s)
# What this run writes is newer than this mark: a reference committed before is not packed.
mark=$(mktemp) && trap 'rm -f "$mark"' EXIT
say() { printf '[gpu-check %4ds] %s\n' $(($(date +%s) - started)) "$*" | tee -a "$logs/steps.txt"; }

# 1. What the image lacks, from the wheels (tools/gpu-check/install.sh).
if [ -n "$resume" ] && [ -e .venv/.installed-cuda13 ]; then
    say "resuming: the installed .venv is kept"
elif compgen -G "$wheels/*.whl" >/dev/null; then
    say "installing $(ls "$wheels"/*.whl | wc -l) carried wheels into .venv"
    tools/gpu-check/install.sh "$wheels" 2>&1 | tee -a "$logs/steps.txt"
    [ "${PIPESTATUS[0]}" = 0 ] || { say "installing failed"; exit 1; }
fi

# 2. The check itself, stopped where the budget ends (its jobs die with it), leaving time
# for the stress (unless a resumed one ended before), a verdict and the packing: 70 s
# besides the stress's own.
stress_done() { grep -q " launches in " "$logs/ddp-stress.txt" 2>/dev/null; }
[ -n "$resume" ] && stress_done && stress_s=0
left=$((budget - ($(date +%s) - started) - stress_s - tests_s - 70))
say "make gpu-check${resume:+ GPU_RESUME=1} (${left} s left for it)"
timeout --signal=TERM --kill-after="$grace" "$left" make gpu-check CUDA=13 ${resume:+GPU_RESUME=1} \
    2>&1 | tee -a "$logs/make.txt"
status=${PIPESTATUS[0]}
say "make gpu-check ended with status $status"
# 124: stopped by TERM; 137: still running after the grace, killed (snakemake waits for
# its jobs' ends, which can take longer).
if [ "$status" = 124 ] || [ "$status" = 137 ]; then
    say "out of time: the verdict on the records made (RESUME=1 goes on)"
    timeout 25 make gpu-verdict CUDA=13 2>&1 | tee -a "$logs/make.txt"
fi

# 3. The local DDP cells launched over and over beside CPU load: do they ever hang here?
if [ "$stress_s" -gt 0 ]; then
    load=$(($(nproc) / 2))
    say "DDP stress: up to ${DDP_STRESS_LAUNCHES:-60} launches in ${stress_s} s beside $load spinning processes"
    timeout --signal=TERM --kill-after=10 $((stress_s + 10)) .venv/bin/python \
        benchmarks/ddp_stress.py --launches "${DDP_STRESS_LAUNCHES:-60}" --seconds "$stress_s" \
        --deadline "$deadline" --load "$load" >"$logs/ddp-stress.txt" 2>&1
    say "DDP stress ended with status $? ($(tail -1 "$logs/ddp-stress.txt"))"
fi

# 4. The tests that run the CUDA backends for real, where time was set aside for them.
if [ "$tests_s" -gt 0 ]; then
    say "make gpu-tests (${tests_s} s)"
    timeout --signal=TERM --kill-after=10 "$tests_s" make gpu-tests CUDA=13 >>"$logs/make.txt" 2>&1
    say "make gpu-tests ended with status $? ($(tail -1 results/gpu-check/pytest-gpu.txt 2>/dev/null))"
fi

# 5. One archive: the reference (records, tables, figures, verdict) and the logs.
cp -r results/gpu-check "$logs/" 2>/dev/null
tar -czf "$logs/job-logs.tar.gz" results/logs .snakemake/log 2>/dev/null
reference=$(find reference -mindepth 2 -newer "$mark" 2>/dev/null | head -1 | cut -d/ -f1-2)
gpu=$(basename "${reference:-no-reference}")
archive="$archive_dir/gpu-check-$gpu.tar.gz"
tar -czf "$archive" ${reference:+"$reference"} "$logs"
say "packed $archive ($(du -h "$archive" | cut -f1)): ${reference:-no reference/<gpu>/ was written}"
exit "$status"
