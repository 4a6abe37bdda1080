"""Reader for ``health_check`` (``/proc/fs/lustre/health_check`` up to 2.10, ``/sys/fs/lustre/
health_check`` after; ``lctl get_param health_check``).

Real example (Lustre 2.10.1, ``/sys/fs/lustre/health_check``)::

    healthy

Real example (``lctl get_param health_check`` on an unhealthy OSS)::

    health_check=device lustre-OST0012 reported unhealthy
    device lustre-OST0014 reported unhealthy

Values (``obd_health_check`` users in lustre/obdclass/obd_sysfs.c): ``healthy``, ``NOT HEALTHY``,
``LBUG``, or one ``device <target> reported unhealthy`` line per failing target.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from lustre_alloc.common.errors import HealthCheckError
from lustre_alloc.collectors.readers._common import split_lines

_DEVICE_RE = re.compile(r"^device (\S+) reported unhealthy$", re.ASCII)


@dataclass(slots=True)
class Health:
    """``healthy`` is True only for the single word ``healthy``; ``unhealthy_targets`` lists the
    named devices; ``status`` is the first line as printed."""
    healthy: bool
    status: str
    unhealthy_targets: list[str] = field(default_factory=list)


def parse_health_check(text: str, source: str = "<text>") -> Health:
    """Parse ``health_check``.

    Raises:
        HealthCheckError: empty text or an unknown first line.
    """
    lines = [line.strip() for _, line in split_lines(text) if line.strip()]
    if not lines:
        raise HealthCheckError("empty health_check", source=source)
    if lines[0] == "healthy" and len(lines) == 1:
        return Health(True, "healthy")
    targets = [m.group(1) for m in map(_DEVICE_RE.match, lines) if m]
    if lines[0] in ("NOT HEALTHY", "LBUG") or targets:
        return Health(False, lines[0][:80], targets)
    raise HealthCheckError(f"unknown status {lines[0][:40]!r}", source=source, line=1)
