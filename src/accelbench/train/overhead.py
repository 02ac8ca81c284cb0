"""What the measured loop adds to a training step: a benchmark, not a test.

The loop's time per mini-batch (accelbench.train.loop, the same code the
workflow runs) is compared with the bare forward, backward and optimiser step
of the same model on the same batch, timed by torch.utils.benchmark.Timer. The
two are measured in alternating rounds, so that drift in the machine's load
hits both alike; the overhead is the difference of the medians over the bare
median.

    python -m accelbench.train.overhead --model resnet50 --device cpu1 --batch 16 \\
        --image-size 224 --steps 5 --rounds 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from typing import Any

from accelbench.devices import Device, cpu_threads, parse_device
from accelbench.grid import TrainExperiment, train_exclusion
from accelbench.train import strategies
from accelbench.train.loop import measure_training
from accelbench.train.settings import TrainSettings


def bare_step_times(exp: TrainExperiment, settings: TrainSettings, warmup: int) -> list[float]:
    """Per-step times (s) of forward, backward and optimiser step alone, by Timer.timeit(1)."""
    from torch.utils import benchmark

    from accelbench.train import session as sessions

    device = parse_device(exp.device)
    threads = strategies.threads_per_process(exp.strategy, device)
    place = strategies.placement(exp.strategy, device, 0, 1, 0)
    with cpu_threads(Device("cpu", threads)):
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
        for _ in range(warmup):
            bare()
        return [timer.timeit(1).times[0] for _ in range(settings.steps)]


def harness_overhead(
    exp: TrainExperiment, settings: dict[str, Any], rounds: int = 2
) -> dict[str, Any]:
    """Alternate the loop and the bare step `rounds` times; medians and the relative overhead."""
    reason = train_exclusion(exp)
    if reason:
        raise ValueError(reason)
    parsed = TrainSettings.from_mapping(settings)
    harness, bare = [], []
    for _ in range(rounds):
        outcome = measure_training(exp, settings)
        if outcome.status != "ok":
            raise RuntimeError(f"{exp.id}: {outcome.status}: {outcome.reason}")
        harness.append(outcome.metrics["time_per_batch"]["median"])
        bare.append(statistics.median(bare_step_times(exp, parsed, parsed.warmup_steps)))
    harness_median, bare_median = statistics.median(harness), statistics.median(bare)
    return {
        "harness_rounds_s": harness,
        "bare_rounds_s": bare,
        "harness_s": harness_median,
        "bare_s": bare_median,
        "overhead": (harness_median - bare_median) / bare_median,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--device", default="cpu1")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup-steps", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    exp = TrainExperiment(args.model, args.device, args.precision, "single", args.batch)
    settings = {
        "steps": args.steps,
        "warmup_steps": args.warmup_steps,
        "image_size": args.image_size,
    }
    result = harness_overhead(exp, settings, args.rounds)
    rounds = ", ".join(
        f"{h:.4f}/{b:.4f}"
        for h, b in zip(result["harness_rounds_s"], result["bare_rounds_s"], strict=True)
    )
    print(f"{exp.id}: loop {result['harness_s']:.4f} s, bare step {result['bare_s']:.4f} s")
    print(f"rounds (loop/bare, s): {rounds}")
    print(f"overhead of the measured loop: {100 * result['overhead']:+.2f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
