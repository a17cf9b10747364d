"""The embedded Batsim-compatible discrete-event simulator and the workload tools.

Modules, one concept each:

- ``protocol``: Batsim 4.x JSON messages for both sides (typed events, encode/decode,
  validation with :class:`protocol.ProtocolError`). The broker imports this one.
- ``platform`` / ``workload``: SimGrid platform XML and workload JSON, validated.
- ``engine``: the event core (:class:`engine.Simulator`), no sockets.
- ``runner``: the ZMQ REQ side; ``cli``: ``timewarp sim``; ``outputs``: Batsim's CSVs.
- ``swf``, ``generators``, ``workload_cli``: ``timewarp workload``.
- ``fcfs``: the reference FCFS decision process; ``testing``: helpers for tests.

See ``docs/simulator.md``.
"""
