"""What the runtime (inside scheduler processes) and the broker share, below both: the
clock's wire format (``clockproto``) and sockets (``clocknet``), the poll wake-up pipe
(``wakeup``) and the in-cluster configuration redirect (``incluster``). Nothing here
imports the rest of timewarp."""
