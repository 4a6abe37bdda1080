"""Reader for the LNet counters file: ``/proc/sys/lnet/stats`` (up to 2.10) or
``/sys/kernel/debug/lnet/stats`` (2.11+, LU-8066).

Real example (Lustre 2.10.1, ``/proc/sys/lnet/stats``)::

    0 28 0 101719323 101719291 0 0 21201322992 53029565353720 0 0

One line, 11 space-separated numbers (``__proc_lnet_stats`` in lnet/lnet/router_proc.c: seven
``%u`` then four ``%llu``):

==  =============  =========================================
#   name           meaning
==  =============  =========================================
1   msgs_alloc     messages allocated now (gauge)
2   msgs_max       high-water mark of msgs_alloc (gauge)
3   errors         errors (count)
4   send_count     messages sent (count)
5   recv_count     messages received (count)
6   route_count    messages routed (count)
7   drop_count     messages dropped (count)
8   send_length    bytes sent
9   recv_length    bytes received
10  route_length   bytes routed
11  drop_length    bytes dropped
==  =============  =========================================

Writing anything to the file clears the counters (the collector sees a reset).
"""
from __future__ import annotations

from lustre_alloc.common.errors import LnetStatsError

#: Field names in file order.
FIELDS = ("msgs_alloc", "msgs_max", "errors", "send_count", "recv_count", "route_count",
          "drop_count", "send_length", "recv_length", "route_length", "drop_length")
#: Fields that are gauges, not cumulative counters.
GAUGES = frozenset({"msgs_alloc", "msgs_max"})


def parse_lnet_stats(text: str, source: str = "<text>") -> dict[str, int]:
    """The 11 LNet counters by name.

    Raises:
        LnetStatsError: not exactly 11 non-negative decimal integers.
    """
    parts = text.split()
    if len(parts) != len(FIELDS):
        raise LnetStatsError(f"expected {len(FIELDS)} numbers, got {len(parts)}", source=source,
                             line=1)
    values: dict[str, int] = {}
    for name, part in zip(FIELDS, parts):
        if not (part.isascii() and part.isdigit()) or len(part) > 20:
            raise LnetStatsError(f"not a non-negative integer: {part[:30]!r}", source=source,
                                 line=1, field=name)
        values[name] = int(part)
    return values
