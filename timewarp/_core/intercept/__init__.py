"""How the runtime reaches code it did not rewrite, one module per mechanism (threads,
fork, concurrent.futures, anyio, asyncio, logging, the facade's sockets), listed in
``registry`` in the order activation installs them. A new one (trio, gevent) is a new
module defining a ``Mechanism`` and one line of ``registry.MECHANISMS``."""
