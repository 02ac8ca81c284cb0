"""One process of a ddp/fsdp experiment started by torchrun (see distributed.py).

`python -m accelbench.train.worker REQUEST RESULT`: REQUEST is the experiment
and its settings (JSON); rank 0 writes the combined result to RESULT, a rank
that fails writes why next to it (distributed.run_rank).
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

from accelbench import registry
from accelbench.platform import ranks
from accelbench.platform.processes import dump_stacks_into_the_job_log
from accelbench.train import distributed
from accelbench.train.loop import train_process
from accelbench.train.settings import TrainSettings


def main(request_path: str, result_path: str) -> int:
    dump_stacks_into_the_job_log()
    request = json.loads(Path(request_path).read_text())
    rendezvous = ranks.from_environment()
    if rendezvous is None:
        raise ranks.LaunchError("accelbench.train.worker runs under torchrun or srun")
    registry.use_plugins(request["plugins"])
    exp = experiment(request)
    settings = TrainSettings.from_params(request["settings"])
    return distributed.run_rank(
        lambda: train_process(exp, settings, rendezvous), rendezvous.rank, Path(result_path)
    )


def experiment(request: dict[str, Any]) -> Any:
    """The request's experiment, of the type it names ("module:name": the training family's
    declaration, imported by name, so that the training code imports no declaration)."""
    module, name = request["experiment_type"].split(":")
    return getattr(importlib.import_module(module), name)(**request["experiment"])


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
