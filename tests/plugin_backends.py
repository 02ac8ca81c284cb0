"""A backend of an installed package, for the tests: a distribution on a folder of its own
(put on sys.path or PYTHONPATH) whose entry point names a backend module in the group
accelbench.backends."""

from __future__ import annotations

from pathlib import Path

TWIN = """\
from accelbench.backends import Backend
from accelbench.backends.arrays import NUMPY
from accelbench.measuring import timers


def samples(fn, threads, settings, label):
    return timers.TORCH.samples(fn, threads, settings, label)


SPEC = Backend(
    "numpy-twin",
    ("cpu",),
    timers.Timer("the twin's own timer", samples),
    lambda device, dtype: None,
    array_module=lambda: NUMPY,
)
"""


def install(site: Path, package: str, version: str, source: str, name: str) -> None:
    """Module `package` with `source`, and its distribution's entry point `name` = it."""
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_text(source)
    info = site / f"{package}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[accelbench.backends]\n{name} = {package}\n")
