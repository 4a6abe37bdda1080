"""Reader for ``lnetctl stats show`` (YAML).

Real example (Lustre 2.14/2.15, ``lnetctl stats show``, abridged)::

    statistics:
        msgs_alloc: 0
        msgs_max: 39
        rst_alloc: 15
        errors: 0
        send_count: 1110532
        recv_count: 1110512
        drop_count: 11
        send_length: 261865376
        recv_length: 254091008
        drop_length: 4832

Keys (lnet/utils/lnetctl.c, ``jt_show_stats``): 2.10 prints the same 11 counters as the LNet
``stats`` file (see :mod:`collectors.readers.lnet_stats`); 2.12+ adds ``rst_alloc``,
``resend_count``, ``response_timeout_count``, ``local_{interrupt,dropped,aborted,no_route,
timeout,error}_count``, ``remote_{dropped,error,timeout}_count``, ``network_timeout_count``.
Counts are messages, ``*_length`` are bytes. Unknown keys are kept; non ``key: integer`` lines are
skipped.
"""
from __future__ import annotations

import re

from common.errors import LnetctlError
from collectors.readers._common import split_lines

_ITEM_RE = re.compile(r"^\s+([A-Za-z_]\w*):\s+(\d{1,20})$", re.ASCII)


def parse_lnetctl_stats(text: str, source: str = "<text>") -> dict[str, int]:
    """Counters of ``lnetctl stats show`` by name.

    Raises:
        LnetctlError: no ``statistics:`` header, or no counter under it.
    """
    values: dict[str, int] = {}
    in_block = False
    for lineno, line in split_lines(text):
        if not line.strip():
            continue
        if line == "statistics:":
            in_block = True
            continue
        if not in_block:
            raise LnetctlError("expected 'statistics:' header", source=source, line=lineno)
        m = _ITEM_RE.match(line)
        if m:
            values.setdefault(m.group(1), int(m.group(2)))
    if not values:
        raise LnetctlError("no counters under 'statistics:'", source=source)
    return values
