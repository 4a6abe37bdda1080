"""Time windows for the migration service (``[migrate] windows``): moves start only inside
one, as a site runs its heavy maintenance at night or at weekends.

A window is ``"HH:MM-HH:MM"`` in the node's local time; one whose end is at or before its
start spans midnight (``"22:00-06:00"``); a leading day set limits it to those days
(``"sat,sun 00:00-24:00"``, days ``mon`` .. ``sun``, the start's day for a window spanning
midnight). No windows: always.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_WINDOW = re.compile(r"^(?:(?P<days>[a-z,]+)\s+)?(?P<h0>\d{1,2}):(?P<m0>\d{2})-(?P<h1>\d{1,2}):(?P<m1>\d{2})$")


@dataclass(frozen=True)
class Window:
    """Minutes of the day ``[start, end)``; ``days`` the weekdays it starts on (0 = Monday)."""
    start: int
    end: int
    days: frozenset[int]

    def contains(self, weekday: int, minute: int) -> bool:
        if self.end > self.start:
            return weekday in self.days and self.start <= minute < self.end
        return (weekday in self.days and minute >= self.start) or \
            ((weekday - 1) % 7 in self.days and minute < self.end)


def parse_window(text: str) -> Window:
    """One window (module doc). Raises ValueError naming it."""
    m = _WINDOW.match(text.strip().lower())
    if not m:
        raise ValueError(f"window {text!r}: expected [days ]HH:MM-HH:MM")
    h0, m0, h1, m1 = (int(m.group(k)) for k in ("h0", "m0", "h1", "m1"))
    if h0 > 24 or h1 > 24 or m0 > 59 or m1 > 59 or h0 * 60 + m0 > 1440 or h1 * 60 + m1 > 1440:
        raise ValueError(f"window {text!r}: not a time of day")
    days = frozenset(range(7))
    if m.group("days"):
        try:
            days = frozenset(DAYS.index(d) for d in m.group("days").split(",") if d)
        except ValueError:
            raise ValueError(f"window {text!r}: days are {', '.join(DAYS)}") from None
    return Window(h0 * 60 + m0, h1 * 60 + m1, days)


def open_now(windows: tuple[Window, ...], now_s: float) -> bool:
    """Moves may start at ``now_s`` (wall seconds, local time): inside a window, or none set."""
    if not windows:
        return True
    t = time.localtime(now_s)
    return any(w.contains(t.tm_wday, t.tm_hour * 60 + t.tm_min) for w in windows)
