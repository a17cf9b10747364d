"""The drivers that move simulated time: deterministic engine, lockstep, realtime,
standalone, in-process; and API pacing."""
