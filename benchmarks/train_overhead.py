"""What the measured loop adds to a training step (accelbench.train.overhead): one model,
optimiser and batch, the loop's own step paired with the bare step.

    python benchmarks/train_overhead.py --model resnet50 --device cpu1 --batch 16 \\
        --image-size 224 --pairs 10
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from accelbench.families.train import TrainExperiment
from accelbench.train.models import models
from accelbench.train.overhead import harness_overhead
from accelbench.train.settings import TrainSettings


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--device", default="cpu1")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--batch", type=int, help="default: the model's default batch")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args(argv)
    batch = args.batch or models()[args.model].default_batch
    exp = TrainExperiment(args.model, args.device, args.precision, "single", batch)
    result = harness_overhead(
        exp, TrainSettings(image_size=args.image_size), args.pairs, args.warmup
    )
    overhead = result["overhead"]
    print(
        f"{exp.id}: loop step {result['loop_median_s']:.4f} s, "
        f"bare step {result['bare_median_s']:.4f} s (medians of {args.pairs})"
    )
    pairs = ", ".join(
        f"{loop:.4f}/{bare:.4f}"
        for loop, bare in zip(result["loop_s"], result["bare_s"], strict=True)
    )
    print(f"pairs (loop/bare, s): {pairs}")
    print(
        f"overhead of the measured loop: {100 * overhead['median']:+.2f} % "
        f"[{100 * overhead['ci_low']:+.2f}, {100 * overhead['ci_high']:+.2f}] "
        f"({100 * overhead['ci_level']:.0f}% CI of the median of paired differences)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
