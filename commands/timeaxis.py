"""The unit a plot's time axis reads best in: seconds for a run of up to two hours,
hours up to two days, days beyond (a week in seconds is a row of unreadable
six-digit ticks)."""

from __future__ import annotations

HOUR = 3600.0
DAY = 86400.0


def time_unit(horizon_s: float) -> tuple[float, str]:
    """(seconds per unit, unit name) for an axis running to ``horizon_s``."""
    if horizon_s > 2 * DAY:
        return DAY, "days"
    if horizon_s > 2 * HOUR:
        return HOUR, "h"
    return 1.0, "s"
