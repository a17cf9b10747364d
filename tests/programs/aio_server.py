"""An aiohttp server on a virtual-time loop (``web.AppRunner``/``TCPSite``), run under
``timewarp run --standalone``: prints its port and waits, sleeping 1 s at a time, until a
request from outside was served."""

import asyncio

from aiohttp import web


async def main() -> None:
    served = asyncio.Event()

    async def hello(_request):
        served.set()
        return web.Response(text="ok\n")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"port {site._server.sockets[0].getsockname()[1]}", flush=True)
    while not served.is_set():
        await asyncio.sleep(1)
    await runner.cleanup()
    print("served")


asyncio.run(main())
