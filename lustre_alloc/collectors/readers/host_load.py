"""Reader for server load: CPU%, memory% and load average (Table I: "CPU% Memory%").

The paper reads ``/proc/loadavg`` and ``/proc/meminfo``; we use psutil, which reads the same
files (``/proc/stat`` for CPU times, ``/proc/meminfo``, ``/proc/loadavg``). Real example of
``/proc/loadavg``::

    0.52 0.58 0.59 2/612 48211

Values: ``cpu_percent`` is the busy share of all CPUs since the previous call, 0..100;
``mem_percent`` is ``(total - available) / total`` x 100 (psutil ``virtual_memory().percent``);
``load1`` is the 1-minute load average (runnable + uninterruptible tasks).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

from lustre_alloc.common.errors import SourceUnavailable


@dataclass(frozen=True, slots=True)
class HostLoad:
    """Server load at one instant: percentages 0..100 and the 1/5/15-minute load averages."""
    cpu_percent: float
    mem_percent: float
    load1: float
    load5: float
    load15: float


class HostLoadReader:
    """Keeps psutil's CPU-time baseline between calls, so each read covers one interval."""

    def __init__(self) -> None:
        psutil.cpu_percent(interval=None)  # first call only sets the baseline

    def read(self) -> HostLoad:
        """CPU% over the time since the previous call, current memory% and load average.

        Raises:
            SourceUnavailable: psutil or ``getloadavg`` failed (``reason="io"``).
        """
        try:
            cpu = psutil.cpu_percent(interval=None)
            mem = psutil.virtual_memory().percent
            load1, load5, load15 = os.getloadavg()
        except (OSError, psutil.Error) as exc:
            raise SourceUnavailable("psutil", "io", str(exc)) from exc
        return HostLoad(float(cpu), float(mem), load1, load5, load15)
