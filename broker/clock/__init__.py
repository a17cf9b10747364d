"""Virtual time: the clock service that owns simulated time, its timers and quiescence."""
