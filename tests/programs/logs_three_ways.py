"""Logs with the standard library, loguru and structlog, 170 s apart (real time.sleep)."""

import logging
import sys
import time

import structlog
from loguru import logger

logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(asctime)s std %(message)s")
logger.remove()
logger.add(sys.stdout, format="{time:YYYY-MM-DD HH:mm:ss.SSS} loguru {message} ({elapsed})")
structlog.configure(
    processors=[
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.TimeStamper(fmt=None, key="unix"),
        structlog.processors.KeyValueRenderer(key_order=["timestamp", "unix", "event"]),
    ],
    logger_factory=structlog.PrintLoggerFactory(sys.stdout),
)
slog = structlog.get_logger()

for i in range(2):
    logging.info("binding %d", i)
    logger.info("binding {}", i)
    slog.info(f"binding {i}")
    print(f"relative {logging.makeLogRecord({}).relativeCreated:.0f} ms", flush=True)
    time.sleep(170)
