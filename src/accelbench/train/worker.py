"""One process of a locally launched ddp/fsdp experiment (run by torchrun, see distributed.py).

`python -m accelbench.train.worker REQUEST RESULT`: REQUEST is the experiment
and its settings (JSON); rank 0 writes the combined result to RESULT. A rank
that fails writes RESULT.rank<N>.error (its exception's type and message, JSON)
and exits non-zero,
so the launching process can say which rank failed and why.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

from accelbench.grid import TrainExperiment
from accelbench.train import distributed
from accelbench.train.loop import train_process
from accelbench.train.settings import TrainSettings


def main(request_path: str, result_path: str) -> int:
    request = json.loads(Path(request_path).read_text())
    rendezvous = distributed.from_environment()
    if rendezvous is None:
        raise distributed.LaunchError("accelbench.train.worker runs under torchrun or srun")
    try:
        result = train_process(
            TrainExperiment(**request["experiment"]),
            TrainSettings.from_mapping(request["settings"]),
            rendezvous,
        )
    except Exception as err:  # the launcher reports it; the traceback goes to torchrun's log
        traceback.print_exc()
        error = Path(f"{result_path}.rank{rendezvous.rank}.error")
        error.write_text(json.dumps({"type": type(err).__name__, "message": str(err)}))
        return 1
    if rendezvous.is_primary:
        partial = Path(result_path + ".part")
        partial.write_text(json.dumps(result))
        partial.rename(result_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
