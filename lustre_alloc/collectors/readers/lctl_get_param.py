"""Reader for ``lctl get_param`` output: split a dump into one text per parameter.

Real example (Lustre 2.14 DDN, ``lctl get_param osd-ldiskfs.*.kbytesfree obdfilter.*.stats
obdfilter.*.job_stats``, abridged)::

    osd-ldiskfs.ai400-OST0000.kbytesfree=3875693364
    obdfilter.ai400-OST0000.stats=
    snapshot_time             1688603042.554414847 secs.nsecs
    write_bytes               25001 samples [bytes] 98304 4194304 104857600000 439803838556274688
    obdfilter.ai400x2-OST0000.job_stats=job_stats:

Each parameter starts at column 0 with its dotted name, ``=``, and the first line of its value
(empty when the value has several lines: ``lctl`` then starts the value on the next line). The
value runs to the next parameter line. The value texts are fed to the same readers as the files
(``lctl get_param`` reads the same /proc, /sys and debugfs files, lustre/utils/lustre_cfg.c).

Running ``lctl`` is done by :func:`run_lctl`; the command is configurable so that a test can
point it at a script that prints a saved dump.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from typing import Sequence

from lustre_alloc.common.errors import LctlParamError, SourceUnavailable
from lustre_alloc.collectors.readers._common import split_lines

_PARAM_RE = re.compile(r"^(?P<name>[A-Za-z0-9_][A-Za-z0-9_.@:\-]*)=(?P<rest>.*)$", re.ASCII)


@dataclass(slots=True)
class ParamDump:
    """Parameters of one ``lctl get_param`` run.

    Attributes:
        values: parameter name -> value text (first occurrence kept), in output order.
        skipped: ``(line number, reason)``: repeated parameters and lines before the first one.
    """
    values: dict[str, str] = field(default_factory=dict)
    skipped: list[tuple[int, str]] = field(default_factory=list)

    def matching(self, kind: str, leaf: str) -> dict[str, str]:
        """``{target: text}`` for parameters ``<kind>.<target>.<leaf>`` (``kind`` may be
        ``osd-*`` to match any OSD type)."""
        out: dict[str, str] = {}
        for name, text in self.values.items():
            head, _, rest = name.partition(".")
            target, _, tail = rest.partition(".")
            if tail != leaf or not target:
                continue
            if head == kind or (kind == "osd-*" and head.startswith("osd-")):
                out.setdefault(target, text)
        return out


def parse_get_param(text: str, source: str = "lctl get_param") -> ParamDump:
    """Split ``lctl get_param`` output into parameters.

    Raises:
        LctlParamError: the output holds no ``name=value`` line at all.
    """
    dump = ParamDump()
    name: str | None = None
    lines: list[str] = []

    def flush() -> None:
        if name is None:
            return
        if name in dump.values:
            dump.skipped.append((start, f"repeated parameter {name}"))
        else:
            dump.values[name] = "\n".join(lines) + ("\n" if lines else "")

    start = 0
    for lineno, line in split_lines(text):
        m = _PARAM_RE.match(line)
        if m:
            flush()
            name, start = m.group("name"), lineno
            lines = [m.group("rest")] if m.group("rest") else []
        elif name is None:
            if line.strip():
                dump.skipped.append((lineno, "text before the first parameter"))
        else:
            lines.append(line)
    flush()
    if not dump.values:
        raise LctlParamError("no 'name=value' parameter line", source=source)
    return dump


def run_lctl(command: Sequence[str], params: Sequence[str], timeout_s: float = 10.0) -> str:
    """Run ``<command> get_param <params...>`` and return its standard output.

    Args:
        command: the ``lctl`` command as argv (``["lctl"]`` on a server; a test script in tests).
        params: parameter patterns, e.g. ``obdfilter.*.stats``.
        timeout_s: kill the command after this many seconds.

    Raises:
        SourceUnavailable: the command is missing, fails, or times out (``reason="command"``).
    """
    argv = [*command, "get_param", *params]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False,
                              errors="replace")
    except (OSError, subprocess.SubprocessError) as exc:
        raise SourceUnavailable(" ".join(command), "command", str(exc)) from exc
    # lctl exits non-zero when one pattern matches nothing but still prints the others.
    if not proc.stdout.strip():
        raise SourceUnavailable(" ".join(command), "command",
                                f"exit {proc.returncode}: {proc.stderr.strip()[:200]}")
    return proc.stdout
