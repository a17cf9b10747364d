import logging
from datetime import datetime, timedelta

from apscheduler.schedulers.background import BackgroundScheduler
from threading import Event

done = Event()
runs: list[datetime] = []


def tick() -> None:
    runs.append(datetime.now())
    if len(runs) >= 60:
        done.set()


def main() -> None:
    logging.basicConfig(level=logging.INFO)
    scheduler = BackgroundScheduler()
    scheduler.add_job(tick, "interval", minutes=1, next_run_time=datetime.now() + timedelta(minutes=1))
    scheduler.start()
    done.wait(timeout=2 * 3600)
    scheduler.shutdown()
    print(f"{len(runs)} runs, first {runs[0]:%H:%M}, last {runs[-1]:%H:%M}")


if __name__ == "__main__":
    main()
