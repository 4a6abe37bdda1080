"""What an admin asks of the migration service, and what it tells them back, through its
state directory (no socket: the commands run as root on the service's node, and what was
asked survives a restart of either side).

* ``<state_dir>/admin.json``: the admin's standing orders, written by
  ``lustre-alloc-rebalance drain|undrain|pause|resume --config FILE`` and read by the
  service at every loop::

      {"paused": {"since_s": 1764270000.0, "reason": "month-end runs"},
       "drains": {"5": {"since_s": 1764260000.0}}}

  A drained OST is evacuated like a steered one (every listed file with an object there
  moves off, nothing is moved onto it) until it is undrained. A drain moves existing data
  only: new objects still land on the OST unless it is also kept out of allocation
  (``lctl set_param osp.<fsname>-OST<idx>-osc-MDT*.max_create_count=0`` on the MDS, or the
  mapper's steering); ``status`` says when the mapper still places on it. Paused, the
  service starts nothing (running moves finish).
* ``<state_dir>/status.json``: the service's :meth:`MigrationService.status` after every
  loop, which ``lustre-alloc-rebalance status`` prints: per evacuated OST the bytes and files
  left, the rate over the last :data:`RATE_WINDOW_S`, an ETA, and ``drained`` once a pass
  finds nothing movable left on it; ``<state_dir>/plan.json`` holds the current plan's
  moves, for review in ``dry_run`` before ``mode = "on"``.

Every file is replaced atomically (written beside, fsync-ed, renamed, the directory
fsync-ed), so a reader never sees half of one. A damaged ``admin.json`` is one line naming
it (:class:`AdminError`); the service keeps its last good orders and reports the error.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lustre_alloc.mapper.service.ctl import gib_text, ost_lines

ADMIN_FILE = "admin.json"
STATUS_FILE = "status.json"
PLAN_FILE = "plan.json"
RATE_WINDOW_S = 600.0
"""The window the per-OST move rate (and so the ETA) is measured over, s."""
OST_NAME = re.compile(r"^(?:[A-Za-z0-9_-]+-)?OST([0-9a-fA-F]{4,8})(?:_UUID)?$")


class AdminError(ValueError):
    """An unreadable admin file or a bad OST name: one line."""


@dataclass
class AdminOrders:
    """The admin's standing orders (module doc). Times: wall seconds."""
    paused: dict[str, Any] | None = None
    drains: dict[int, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"paused": self.paused,
                "drains": {str(k): v for k, v in sorted(self.drains.items())}}


def parse_ost(text: str) -> int:
    """An OST index from ``5``, ``OST0005``, ``scratch-OST0005`` or ``..._UUID``.

    Raises AdminError."""
    t = text.strip()
    if t.isdigit():
        return int(t)
    m = OST_NAME.match(t)
    if not m:
        raise AdminError(f"{text!r}: not an OST (an index, OSTxxxx or <fsname>-OSTxxxx)")
    return int(m.group(1), 16)


def read_orders(state_dir: str | Path) -> AdminOrders:
    """The orders in ``state_dir`` (none yet: no orders). Raises AdminError."""
    path = Path(state_dir) / ADMIN_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return AdminOrders()
    except (OSError, ValueError) as exc:
        raise AdminError(f"{path}: {exc}") from None
    try:
        paused = raw.get("paused")
        if paused is not None and not isinstance(paused, dict):
            raise ValueError("paused: not an object")
        drains = {int(k): dict(v) for k, v in (raw.get("drains") or {}).items()}
    except (AttributeError, TypeError, ValueError) as exc:
        raise AdminError(f"{path}: {exc}") from None
    return AdminOrders(paused=paused, drains=drains)


def write_atomically(path: str | Path, doc: Any) -> None:
    """Replace ``path`` with ``doc`` as JSON (module doc)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_orders(state_dir: str | Path, orders: AdminOrders) -> None:
    Path(state_dir).mkdir(parents=True, exist_ok=True)
    write_atomically(Path(state_dir) / ADMIN_FILE, orders.to_json())


def read_status(state_dir: str | Path) -> dict[str, Any]:
    """The service's last status. Raises AdminError (no service has written one yet)."""
    path = Path(state_dir) / STATUS_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AdminError(f"{path}: no status yet (is the service running?)") from None
    except (OSError, ValueError) as exc:
        raise AdminError(f"{path}: {exc}") from None


def format_status(st: dict[str, Any], now_s: float) -> str:
    """``lustre-alloc-rebalance status`` for a person."""
    age = now_s - float(st.get("written_s", now_s))
    lines = [f"migration {st.get('fsname')} ({st.get('mode')}, written {age:.0f} s ago): "
             f"{st.get('running', 0)} running, {st.get('queued', 0)} queued "
             f"({gib_text(st.get('queued_bytes', 0))}), {st.get('done', 0)} done, "
             f"{st.get('failed', 0)} failed, {st.get('given_up', 0)} given up, "
             f"{gib_text(st.get('bytes_moved', 0))} moved"]
    if st.get("paused"):
        lines.append(f"  paused: {st['paused']}")
    if st.get("outside_windows"):
        lines.append(f"  outside its time windows ({', '.join(st.get('windows', []))}): "
                     "nothing starts")
    lines += ost_lines(st.get("osts", []))
    if st.get("skipped"):
        lines.append("  skipped: " + ", ".join(f"{k} {v}" for k, v in sorted(st["skipped"].items())))
    if st.get("last_error"):
        lines.append(f"  last error: {st['last_error']}")
    return "\n".join(lines)
