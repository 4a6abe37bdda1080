"""Small helpers shared by the readers: Lustre timestamps and the counter record."""
from __future__ import annotations

import re
from dataclasses import dataclass

#: ``<sec>.<nsec>`` as printed by ``lprocfs_stats_header`` / ``ktime_get_real_ts64`` users.
TIMESTAMP_RE = r"(\d{1,20})\.(\d{1,9})"


def parse_timestamp(sec: str, nsec: str) -> float:
    """Seconds as a float from the two digit strings of ``<sec>.<nsec>`` (nsec zero-padded)."""
    return int(sec) + int(nsec.ljust(9, "0")[:9]) / 1e9


@dataclass(frozen=True, slots=True)
class Counter:
    """One ``lprocfs`` counter: cumulative since start (or the last clear).

    Attributes:
        samples: number of events.
        unit: Lustre's unit label: ``bytes``, ``reqs``, ``usecs`` (2.14+ ops), ``usec``...
        min, max, sum: present for counters with ``LPROCFS_CNTR_AVGMINMAX`` (``None`` otherwise).
        sumsq: present for ``LPROCFS_CNTR_STDDEV`` counters.
    """
    samples: int
    unit: str
    min: int | None = None
    max: int | None = None
    sum: int | None = None
    sumsq: int | None = None


def split_lines(text: str) -> list[tuple[int, str]]:
    """``(1-based line number, line without trailing blanks)`` for every line of ``text``."""
    return [(i, line.rstrip()) for i, line in enumerate(text.splitlines(), start=1)]


NUMBER_RE = re.compile(r"\d+")
