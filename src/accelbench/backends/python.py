"""Naive Python loops: the baseline every compiled backend is compared with."""

from __future__ import annotations

from accelbench.backends.base import Backend
from accelbench.backends.numpy import always_available
from accelbench.measuring import timers

SPEC = Backend("python", ("cpu",), timers.TORCH, always_available, naive=True)
