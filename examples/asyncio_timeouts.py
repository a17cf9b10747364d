"""An asyncio controller written the ordinary way: timeouts, a periodic reconcile loop and
a blocking call pushed to a thread. Under `timewarp run --standalone` an hour of it takes
a fraction of a second and prints the same times every run."""

import asyncio
import time


async def slow_dependency():
    await asyncio.sleep(3600)


async def reconcile(name, period, rounds, started):
    for i in range(rounds):
        await asyncio.sleep(period)
        print(f"{time.monotonic() - started:8.1f}s  {name} reconciled (round {i + 1})")


async def main():
    started = time.monotonic()
    try:
        await asyncio.wait_for(slow_dependency(), timeout=30)
    except TimeoutError:
        print(f"{time.monotonic() - started:8.1f}s  dependency timed out after 30 s")
    async with asyncio.timeout(120):
        await asyncio.gather(reconcile("pods", 20, 3, started), reconcile("nodes", 45, 2, started))
    blocking = await asyncio.get_running_loop().run_in_executor(
        None, lambda: time.sleep(5) or "done"
    )
    print(f"{time.monotonic() - started:8.1f}s  blocking call in a thread: {blocking}")


asyncio.run(main())
