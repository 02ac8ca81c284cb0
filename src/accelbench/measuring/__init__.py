"""How a measurement is taken and judged: timers and statistics, precision, contention,
host speed, energy, where arrays start in memory, and where a job's time goes."""
