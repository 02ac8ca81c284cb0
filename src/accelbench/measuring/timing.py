"""Split into accelbench.measuring.timers (the library timers) and
accelbench.measuring.statistics (what every metric carries); the names the analysis
still imports from here are kept until it imports them from there."""

from accelbench.measuring.statistics import CI_LEVEL, RERUN_INTERVAL, summarize

__all__ = ["CI_LEVEL", "RERUN_INTERVAL", "summarize"]
