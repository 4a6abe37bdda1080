"""Reader for one-number files: ``kbytesfree``, ``kbytestotal``, ``kbytesavail``, ``filesfree``,
``filestotal`` (and ``degraded``) of an OST or MDT.

Real example (Lustre 2.10.1, ``/proc/fs/lustre/obdfilter/lustrefs-OST0000/kbytesfree``)::

    47029440512

Real example (Lustre 2.14 DDN, ``lctl get_param osd-ldiskfs.*.kbytesfree``)::

    osd-ldiskfs.ai400-OST0000.kbytesfree=3875693364

Units: ``kbytes*`` are KiB (``os_bfree``/``os_blocks``/``os_bavail`` times block size / 1024,
``lprocfs_kbytesfree_seq_show`` in lustre/obdclass/lprocfs_status.c); ``files*`` are inodes
(objects); ``degraded`` is 0 or 1. ``kbytesfree`` counts root-reserved blocks, ``kbytesavail``
does not. Locations: ``/proc/fs/lustre/obdfilter/<ost>/`` up to 2.10, ``/sys/fs/lustre/obdfilter/
<ost>/`` from 2.12 (the ``osd-*`` device holds the same values).
"""
from __future__ import annotations

import re

from lustre_alloc.common.errors import SingleValueError

_VALUE_RE = re.compile(r"^\s*(\d{1,20})\s*$", re.ASCII)

#: File name -> unit of its value.
UNITS = {"kbytesfree": "KiB", "kbytestotal": "KiB", "kbytesavail": "KiB",
         "filesfree": "inodes", "filestotal": "inodes", "degraded": "flag"}


def parse_single_value(text: str, source: str = "<text>") -> int:
    """The non-negative integer of a one-number file.

    Raises:
        SingleValueError: the text is not exactly one decimal integer (blanks allowed around).
    """
    m = _VALUE_RE.match(text)
    if m is None:
        snippet = text[:40].strip()
        raise SingleValueError(f"expected one decimal integer, got {snippet!r}", source=source,
                               line=1)
    return int(m.group(1))
