import asyncio
from asyncio import sleep, wait_for


async def reconcile(name: str, period: float) -> None:
    loop = asyncio.get_event_loop()
    while True:
        started = loop.time()
        await sleep(period)
        print(name, "reconciled after", loop.time() - started)


async def main() -> None:
    try:
        await wait_for(reconcile("nodes", 5.0), timeout=60)
    except asyncio.TimeoutError:
        pass


if __name__ == "__main__":
    asyncio.run(main())
    with asyncio.Runner() as runner:
        runner.run(main())
    other = asyncio.new_event_loop()
    other.run_until_complete(main())
