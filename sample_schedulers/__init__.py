"""Real schedulers written the ordinary way (real time, official kubernetes client).

None of them imports timewarp: they run unchanged on a real cluster."""
