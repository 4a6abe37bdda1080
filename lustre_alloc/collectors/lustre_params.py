"""Reading and writing Lustre tunables by their ``lctl`` names: the seam through which the
steering agents act on Lustre.

Two implementations of :class:`ParamAccess`:

* :class:`LctlParams` runs ``lctl get_param -n <name>`` and ``lctl set_param <name>=<value>``
  on a server: the only supported way to change a tunable (the Lustre Operations Manual's
  command lines for both steering knobs, unchanged from 2.12 to 2.16):

  - ``lctl set_param obdfilter.<fsname>-OST<idx>.degraded=1`` on the OSS ("Handling
    Degraded OST RAID Arrays"; ``ofd_degraded_seq_write`` in ``lustre/ofd/lproc_ofd.c``);
  - ``lctl set_param osp.<fsname>-OST<idx>-osc-MDT<idx>.max_create_count=0`` on the MDS
    ("Removing an OST from the File System"; ``osp_max_create_count_seq_write`` in
    ``lustre/osp/lproc_osp.c``), and the previous value written back to return it.

* :class:`FileParams` maps a name to the file ``lctl`` itself resolves it to under a root
  (``a.b.c`` -> ``sys/fs/lustre/a/b/c``, else ``proc/fs/lustre/a/b/c``): the emulated servers
  of the live stack, whose files the collectors read back.

Both raise :class:`ParamError` with one line naming the parameter and what failed.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Protocol, Sequence

from lustre_alloc.common.errors import CollectorError

NAME_RE = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+$")
"""A parameter name without wildcards (the agents never set a pattern)."""
VALUE_RE = re.compile(r"^-?[0-9]{1,10}$")
"""The values the agents write: one integer."""


class ParamError(CollectorError):
    """A tunable could not be read or written (one line: the name and the cause)."""


class ParamAccess(Protocol):
    """Read and write one tunable by its ``lctl`` name."""

    description: str

    def get(self, name: str) -> str:
        """The value of ``name``, stripped. Raises :class:`ParamError`."""

    def set(self, name: str, value: str) -> None:
        """Write ``value`` to ``name``. Raises :class:`ParamError`."""


def check_name_value(name: str, value: str | None = None) -> None:
    """Raise :class:`ParamError` unless ``name`` is a plain dotted name (no wildcard, no
    path) and ``value`` one integer."""
    if not NAME_RE.match(name):
        raise ParamError(f"parameter {name!r}: not a plain lctl parameter name")
    if value is not None and not VALUE_RE.match(value):
        raise ParamError(f"parameter {name}: value {value!r} is not one integer")


class LctlParams:
    """``lctl get_param -n`` / ``lctl set_param``.

    Args:
        lctl_command: argv of ``lctl`` (tests: a script that records its argv).
        timeout_s: per command.
    """

    def __init__(self, lctl_command: Sequence[str] = ("lctl",), timeout_s: float = 10.0):
        self.command = list(lctl_command)
        self.timeout_s = timeout_s
        self.description = f"{' '.join(self.command)} set_param"

    def _run(self, name: str, args: list[str]) -> str:
        argv = [*self.command, *args]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout_s,
                                  check=False, errors="replace")
        except (OSError, subprocess.SubprocessError) as exc:
            raise ParamError(f"parameter {name}: {' '.join(argv)}: {exc}") from exc
        if proc.returncode != 0:
            raise ParamError(f"parameter {name}: {' '.join(argv)}: exit {proc.returncode}: "
                             f"{proc.stderr.strip()[:200]}")
        return proc.stdout

    def get(self, name: str) -> str:
        check_name_value(name)
        return self._run(name, ["get_param", "-n", name]).strip()

    def set(self, name: str, value: str) -> None:
        check_name_value(name, value)
        self._run(name, ["set_param", f"{name}={value}"])


class FileParams:
    """The files ``lctl`` resolves names to, under ``root``.

    Args:
        root: the directory holding ``sys/`` and ``proc/`` (``/`` on a server).
    """

    def __init__(self, root: str | os.PathLike[str] = "/"):
        self.root = Path(root)
        self.description = f"files under {self.root}"

    def path(self, name: str) -> Path:
        """The existing file of ``name``: ``sys/fs/lustre/...`` first, then
        ``proc/fs/lustre/...``. Raises :class:`ParamError` when neither exists."""
        check_name_value(name)
        rel = Path(*name.split("."))
        for base in ("sys/fs/lustre", "proc/fs/lustre"):
            p = self.root / base / rel
            if p.is_file():
                return p
        raise ParamError(f"parameter {name}: no file under {self.root}/{{sys,proc}}/fs/lustre")

    def get(self, name: str) -> str:
        p = self.path(name)
        try:
            return p.read_text(encoding="ascii", errors="replace").strip()
        except OSError as exc:
            raise ParamError(f"parameter {name}: {p}: {exc.strerror}") from exc

    def set(self, name: str, value: str) -> None:
        check_name_value(name, value)
        p = self.path(name)
        tmp = p.with_name(f".{p.name}.tmp")
        try:                     # atomic, as the emulator writes its files
            tmp.write_text(f"{value}\n", encoding="ascii")
            os.replace(tmp, p)
        except OSError as exc:
            raise ParamError(f"parameter {name}: {p}: {exc.strerror}") from exc


def degraded_param(ost_name: str) -> str:
    """``obdfilter.<fsname>-OST<idx>.degraded`` of an OST target name."""
    return f"obdfilter.{ost_name}.degraded"


def max_create_count_param(osp_device: str) -> str:
    """``osp.<fsname>-OST<idx>-osc-MDT<idx>.max_create_count`` of an OSP device name."""
    return f"osp.{osp_device}.max_create_count"


def osp_devices_of(ost_name: str, devices: Sequence[str]) -> list[str]:
    """The OSP devices (one per MDT on this MDS) that connect to ``ost_name``:
    ``<ost_name>-osc-MDT<idx>``."""
    return sorted(d for d in devices if d.startswith(f"{ost_name}-osc-"))
