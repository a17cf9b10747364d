"""The embedded Batsim-compatible discrete-event simulator."""
