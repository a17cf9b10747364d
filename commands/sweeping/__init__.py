"""Parameter sweeps of ``timewarp simulate`` on Dask (the ``timewarp sweep`` command).

``spec`` reads and validates the sweep file and expands it into points; ``plan`` turns
points into runs (generated inputs, simulate command, content hash); ``runner`` executes
one run on a Dask worker; ``results`` writes runs.csv, summary.csv and the plots.
"""
