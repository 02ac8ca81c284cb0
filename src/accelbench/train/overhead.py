"""What the measured loop adds to a training step: a benchmark, not a test.

One model, optimiser and batch; steps alternate between the loop's own timed
step (accelbench.train.loop.run_steps, the code every experiment runs) and the
bare forward, backward and optimiser step timed by torch.utils.benchmark.Timer.
Each loop step is paired with its neighbouring bare step (which one goes first
alternates), so a change in the machine's load hits both alike; the overhead is
the median of the paired relative differences, with its confidence interval.

    python benchmarks/train_overhead.py --model resnet50 --device cpu1 --batch 16 \\
        --image-size 224 --pairs 10
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

from accelbench.measuring import statistics as sample_stats
from accelbench.measuring import timers
from accelbench.platform.devices import cpu_threads
from accelbench.train import strategies
from accelbench.train.cells import TrainCell, exclusion
from accelbench.train.loop import run_steps
from accelbench.train.settings import TrainSettings


def harness_overhead(
    exp: TrainCell, settings: TrainSettings, pairs: int, warmup: int = 2
) -> dict[str, Any]:
    """Paired loop and bare step times (s) and the relative overhead of the loop."""
    from accelbench.train import session as sessions

    benchmark = timers.torch_benchmark()

    reason = exclusion(exp)
    if reason:
        raise ValueError(reason)
    if strategies.process_count(exp.strategy, exp.parsed_device) != 1:
        raise ValueError("the overhead is measured in one process")
    device = exp.parsed_device
    threads = strategies.threads_per_process(exp.strategy, device)
    place = strategies.placement(exp.strategy, device, 0, 1, 0)
    with cpu_threads(device, threads):
        session = sessions.build(exp, settings, device, place)
        if len(session.step.parts) != 1:
            raise ValueError(f"{exp.model} trains several parts; its bare step is its own step")
        inputs, targets = session.move(session.source.next())
        (model,), (optimizer,) = session.step.parts, session.step.optimizers
        criterion = session.step.criterion

        def bare() -> None:
            optimizer.zero_grad(set_to_none=True)
            criterion(model(inputs), targets).backward()
            optimizer.step()

        timer = benchmark.Timer(stmt="bare()", globals={"bare": bare}, num_threads=threads)
        one_step = replace(settings, warmup_steps=0, warmup_s=0.0, steps=1, min_run_time=0.0)
        for _ in range(warmup):
            run_steps(session, one_step)
            bare()
        loop_times, bare_times = [], []
        for index in range(pairs):
            if index % 2:
                bare_times.append(timer.timeit(1).times[0])
            loop_times.append(run_steps(session, one_step)["step_times"][0])
            if not index % 2:
                bare_times.append(timer.timeit(1).times[0])
    relative = [(loop - bare) / bare for loop, bare in zip(loop_times, bare_times, strict=True)]
    return {
        "loop_s": loop_times,
        "bare_s": bare_times,
        "loop_median_s": statistics.median(loop_times),
        "bare_median_s": statistics.median(bare_times),
        "overhead": sample_stats.summarize(relative, "fraction"),
    }
