"""Reports which waiting stdlib modules the runtime loaded before the program asked."""

import sys

print("asyncio loaded:", "asyncio" in sys.modules)
print("futures loaded:", "concurrent.futures.thread" in sys.modules)
import asyncio  # noqa: E402
import concurrent.futures.thread  # noqa: E402

print("policy:", type(asyncio.get_event_loop_policy()).__name__)
print("pool queue:", type(concurrent.futures.thread.queue).__name__)
