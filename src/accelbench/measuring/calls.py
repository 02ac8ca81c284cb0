"""Timing a prepared call: by its backend's timer, with its copies to and from the device
apart, and its energy in a window after the timing.

Shared by every family that measures a prepared call (kernels, roofs, data science
workloads): each calls the backend's library timer through `time_function`, so that no
family times a call in a way of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from accelbench.measuring import energy, statistics, timers
from accelbench.measuring.sections import Distribution, EnergySection, Metrics, RawSamples

if TYPE_CHECKING:
    from accelbench.backends import Backend
    from accelbench.backends.prepared import Prepared
    from accelbench.measuring.settings import TimedSettings
    from accelbench.platform.devices import Device


def time_function(
    fn, timer: timers.Timer, threads: int, settings: TimedSettings, label: str
) -> timers.Timed:
    """Per-run samples (s) of `fn` from the timer the backend uses, after its warm-up (at
    most `warmup_s` seconds: timers.warm_up; settings without it, one block)."""
    return timer.samples(fn, threads, settings, label)


def time_transfers(
    prepared: Prepared, timer: timers.Timer, threads: int, settings: TimedSettings, label: str
):
    """(transfer samples, end-to-end samples), or None where inputs live on the host."""
    if prepared.upload is None or prepared.download is None:
        return None

    def transfer():
        prepared.upload()
        prepared.download()

    def end_to_end():
        prepared.upload()
        prepared.run()
        prepared.download()

    return (
        time_function(transfer, timer, threads, settings, label + " transfer").samples,
        time_function(end_to_end, timer, threads, settings, label + " end to end").samples,
    )


def add_transfers(metrics: Metrics, raw: dict[str, RawSamples], transfers) -> Distribution:
    """Add transfer_time and end_to_end_time (statistics and raw samples); returns the
    end-to-end statistics."""
    metrics["transfer_time"] = statistics.summarize(transfers[0], "s")
    metrics["end_to_end_time"] = end_to_end = statistics.summarize(transfers[1], "s")
    raw["transfer_time"] = statistics.raw_samples("s", [transfers[0]])
    raw["end_to_end_time"] = statistics.raw_samples("s", [transfers[1]])
    return end_to_end


def energy_window(
    prepared: Prepared,
    backend: Backend,
    device: Device,
    settings: TimedSettings,
    samples: list[float],
) -> EnergySection | None:
    """The energy section of one call: after the timing, the call repeated in a window
    (accelbench.measuring.energy) as long as the settings ask."""
    with energy.Probe(device.is_gpu, range(device.count), settings.energy) as probe:
        sync = backend.synchronizer(device.is_gpu)
        probe.window(prepared.run, float(np.median(samples)), sync)
    return probe.section("call")
