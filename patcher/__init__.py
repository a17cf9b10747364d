"""libcst codemods that route time, threading, queue, sched and asyncio calls to the
timewarp runtime, and the import hook that applies them at import time."""
