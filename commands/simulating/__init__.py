"""``timewarp simulate``'s parts: options, pre-start checks, the run, its simulator, its
progress bar and its report (``commands/simulate.py`` is the command)."""
