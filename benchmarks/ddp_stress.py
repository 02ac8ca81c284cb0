"""DDP stress: launch the local DDP cells again and again, and count the launches that hang.

Each launch is one run of a training cell as a job measures it (accelbench.job): a
process forked from this one, which has imported what a measuring process imports
and started no thread pool, forks the cell's ranks (distributed.launch_forked: a
FileStore of their own, gloo over loopback), and they train for a few steps. The
cells take turns. A launch that outlasts `--deadline` seconds counts as a hang: its
processes write their Python stacks to stderr (processes.ask_for_stacks), then they
are killed; a launch whose ranks gave up waiting for each other (PeersTimedOut)
counts as one too. `--load N` keeps N processes spinning on the CPUs meanwhile.

Printed: a line as each launch ends (so a stress stopped from outside still tells what
it saw), then each cell's launches, hangs and failures, and its launch times (median,
90th percentile, max: from the fork of the launch to its result). `--seconds` ends it
by itself: no launch starts that could not reach its deadline in that time, so a hang
is always told with its stacks. The exit status is 1 if a launch hung, failed, or did
not fork the cell's processes; 0 wanted.

    python benchmarks/ddp_stress.py [--launches 300] [--seconds S] [--load 0]
        [--deadline 60] [--steps 2]
        [--cells train/fcn/cpu2/fp32/ddp/bs64 train/lstm/cpu2/fp32/ddp/bs32]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import select
import signal
import statistics
import sys
import time

from accelbench.families import FAMILIES
from accelbench.grid import experiment_of_id
from accelbench.job import measurement
from accelbench.platform.processes import (
    DEADLINE_VARIABLE,
    ask_for_stacks,
    die_with_parent,
    dump_stacks_on_request,
)
from accelbench.platform.ranks import ranks_may_fork
from accelbench.train.distributed import PeersTimedOut
from accelbench.train.loop import measure_training
from accelbench.train.settings import TrainSettings

CELLS = ["train/fcn/cpu2/fp32/ddp/bs64", "train/lstm/cpu2/fp32/ddp/bs32"]
HUNG = "hung"


def spin() -> None:
    """One process of background load: a CPU kept busy until this benchmark ends."""
    die_with_parent()
    while True:
        pass


def start_load(processes: int) -> list[int]:
    pids = []
    for _ in range(processes):
        pid = os.fork()
        if pid == 0:
            spin()
        pids.append(pid)
    return pids


def _train_once(exp, settings: TrainSettings, deadline: float) -> str:
    """In the launch's own process: "ok", HUNG, or why the launch failed."""
    os.environ[DEADLINE_VARIABLE] = str(time.time() + deadline)
    try:
        with ranks_may_fork():
            outcome = measure_training(exp, settings)
    except PeersTimedOut as err:
        return f"{HUNG}: {err}"
    if outcome.status != "ok":
        return f"{outcome.status}: {outcome.reason}"
    processes = outcome.metrics["processes"]["value"]
    launcher = outcome.params["launcher"]
    if launcher != "fork" or processes != exp.parsed_device.count:
        return f"ran as {processes} processes started by {launcher}, not forked"
    return "ok"


def launch(exp, settings: TrainSettings, deadline: float) -> tuple[str, float]:
    """One launch in a process forked for it: how it ended and its seconds. One that
    outlasts `deadline` writes its processes' stacks to stderr and is killed."""
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        code = 1
        try:
            die_with_parent()
            ended = _train_once(exp, settings, deadline)
            with os.fdopen(write_end, "w") as pipe:
                pipe.write(ended)
            code = 0
        finally:
            sys.stderr.flush()
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        ready, _, _ = select.select([pipe], [], [], deadline)
        if ready:
            ended = pipe.read() or "the launch's process died without a word"
        else:
            print(f"{exp.id}: still running after {deadline:g} s:", file=sys.stderr, flush=True)
            ask_for_stacks(pid)
            os.kill(pid, signal.SIGKILL)  # its ranks die with it (PR_SET_PDEATHSIG)
            ended = HUNG
    os.waitpid(pid, 0)
    return ended, time.perf_counter() - started


def summary(seconds: list[float]) -> str:
    if not seconds:
        return "no launch ended"
    ninetieth = (
        statistics.quantiles(seconds, n=10, method="inclusive")[-1]
        if len(seconds) > 1
        else seconds[0]
    )
    return (
        f"median {statistics.median(seconds):.2f} s, 90th percentile {ninetieth:.2f} s, "
        f"max {max(seconds):.2f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=300, help="in all, the cells in turn")
    parser.add_argument(
        "--seconds", type=float, default=math.inf, help="no launch starts later than this"
    )
    parser.add_argument("--load", type=int, default=0, help="processes spinning meanwhile")
    parser.add_argument("--deadline", type=float, default=60.0, help="seconds per launch")
    parser.add_argument("--steps", type=int, default=2, help="measured steps per launch")
    parser.add_argument("--cells", nargs="+", default=CELLS)
    args = parser.parse_args()
    # The stack headers and the measurement's warnings; a launch's own lines are many.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    dump_stacks_on_request(sys.stderr)  # inherited by every launch and its ranks
    experiments = [experiment_of_id(cell) for cell in args.cells]
    settings = TrainSettings(steps=args.steps, warmup_steps=1)
    started = time.perf_counter()
    measurement.preload(FAMILIES["train"])  # as the fork server does: imports only, no thread pool
    print(f"imports: {time.perf_counter() - started:.1f} s", flush=True)
    load = start_load(args.load)
    ended: dict[str, list[tuple[str, float]]] = {exp.id: [] for exp in experiments}
    launched = 0
    try:
        while launched < args.launches:
            if time.perf_counter() - started + args.deadline > args.seconds:
                print(f"{args.seconds:.0f} s would be over before another deadline", flush=True)
                break
            exp = experiments[launched % len(experiments)]
            how, seconds = launch(exp, settings, args.deadline)
            launched += 1
            ended[exp.id].append((how, seconds))
            print(f"launch {launched}, {exp.id}: {how} ({seconds:.2f} s)", flush=True)
    finally:
        for pid in load:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
    print(
        f"\n{launched} launches in {time.perf_counter() - started:.0f} s, "
        f"{args.load} spinning processes beside them, deadline {args.deadline:g} s"
    )
    bad = 0
    for cell, launches in ended.items():
        hung = sum(how.startswith(HUNG) for how, _ in launches)
        failed = sum(how != "ok" for how, _ in launches) - hung
        bad += hung + failed
        done = [seconds for how, seconds in launches if not how.startswith(HUNG)]
        print(f"{cell}: {len(launches)} launches, {hung} hung, {failed} failed; {summary(done)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
