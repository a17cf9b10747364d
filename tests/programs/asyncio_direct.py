import asyncio

from timewarp import vasyncio, vtime


async def slow():
    await asyncio.sleep(3600)
    return "slow"


async def ticker(n):
    for i in range(n):
        await asyncio.sleep(60)
        print("tick", i, round(asyncio.get_running_loop().time() - 1000, 3), vtime.time())


async def main():
    t0 = vtime.monotonic()
    try:
        await asyncio.wait_for(slow(), timeout=10)
    except TimeoutError:
        print("wait_for timed out after", vtime.monotonic() - t0)
    async with asyncio.timeout(5):
        await asyncio.sleep(1)
    try:
        async with asyncio.timeout(5):
            await asyncio.sleep(100)
    except TimeoutError:
        print("timeout ctx fired at", vtime.monotonic() - t0)
    done, pending = await asyncio.wait([asyncio.create_task(slow())], timeout=30)
    print("wait:", len(done), len(pending), vtime.monotonic() - t0)
    for p in pending:
        p.cancel()
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    loop.call_later(7, fut.set_result, "later")
    print(await fut, vtime.monotonic() - t0)
    await ticker(3)
    r = await loop.run_in_executor(None, lambda: (vtime.sleep(2), "exec")[1])
    print(r, vtime.monotonic() - t0)


vasyncio.run(main())
