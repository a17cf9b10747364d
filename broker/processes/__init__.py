"""Scheduler processes: the launcher and the process tree of a run."""
