"""Starting a run: its config as run, its profile, the targets asked for, its progress, and
the `accelbench run` launcher."""
