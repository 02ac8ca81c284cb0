"""Training benchmarks: registered models trained for a fixed number of steps."""
