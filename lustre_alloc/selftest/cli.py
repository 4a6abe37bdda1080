"""``lustre-alloc-selftest``: the checks of :mod:`lustre_alloc.selftest`, a table, an exit status
(0 every check passed or was skipped, 1 one failed, 2 a usage error).

    lustre-alloc-selftest --dir /lustre/scratch/admin      on a client
    lustre-alloc-selftest                                  on an OSS or MDS: statistics
    lustre-alloc-selftest --steer scratch-OST0003          ... and one steering action

It needs no mapper and only the ``collector`` extra (pyzmq, msgpack, PyYAML, psutil), so it
runs from any role's installation.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import sys
from pathlib import Path
from typing import Callable, Sequence

from lustre_alloc.common.cli import EXIT_FAILED, command_parser, fail
from lustre_alloc.selftest.layouts import LayoutChecks
from lustre_alloc.selftest.rows import FAIL, SKIP, Row, failed, table
from lustre_alloc.selftest.servers import params_for, stats_rows, steer_rows

SHIM_PATHS = (Path("/opt/lustre-alloc/lib/liblustre_alloc.so"),
              Path(__file__).resolve().parents[2] / "liblustre_alloc" / "liblustre_alloc.so")
"""Where ``--shim`` is looked for when not given: the packages' path
(``deploy/install.sh``, the RPM), then a checkout's build."""
MADE_NAMES = ("file", "shim-record.tsv")
"""What a layout check leaves in its directory (removed at the end)."""


PROG = "lustre-alloc-selftest"


def build_parser() -> argparse.ArgumentParser:
    """The command's options."""
    st = command_parser(PROG, "Check this node's Lustre against lustre-alloc's rules before a "
                              "pilot: layouts on a client (--dir), statistics on a server, "
                              "one steering action (--steer). Touches only its own directory.")
    st.add_argument("--dir", type=Path,
                    help="a Lustre directory to make a test directory in (client checks)")
    st.add_argument("--shim", type=Path,
                    help="liblustre_alloc.so (default: " + ", then ".join(map(str, SHIM_PATHS))
                         + ")")
    st.add_argument("--steer", metavar="OST",
                    help="set and restore one steering action on this OST (e.g. "
                         "scratch-OST0003): degraded on its OSS, a drain on the MDS")
    st.add_argument("--steer-journal", default="/var/lib/lustre-alloc/steer-journal.json",
                    help="the collector's steering journal; --steer journals beside it "
                         "(selftest-<name>), where the collector settles what a killed "
                         "selftest left (default /var/lib/lustre-alloc/steer-journal.json)")
    st.add_argument("--source", choices=("auto", "files", "lctl"), default="auto",
                    help="how the collectors read statistics (default auto)")
    st.add_argument("--root", default="/", help="directory holding proc/ and sys/ (default /)")
    st.add_argument("--lctl-command", default="lctl", help="lctl command line (default lctl)")
    st.add_argument("--lnetctl-command", default="lnetctl",
                    help="lnetctl command line (default lnetctl)")
    st.add_argument("--keep", action="store_true",
                    help="leave the test directory and its files for inspection")
    st.add_argument("--verbose", action="store_true", help="print each step")
    st.add_argument("--json", action="store_true", help="print the rows as JSON")
    return st


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(argv), PROG)


def run(args: argparse.Namespace, prog: str) -> int:
    """Run the checks ``args`` ask for; print the table (or JSON with ``--json``)."""
    say: Callable[[str], None] = print if args.verbose else (lambda s: None)
    shim = args.shim or next((p for p in SHIM_PATHS if p.is_file()), None)
    if args.dir is not None and (shim is None or not shim.is_file()):
        return fail(prog, f"no shim library at {shim or ' or '.join(map(str, SHIM_PATHS))} "
                          f"(--shim PATH)", 2)
    if args.dir is not None and not args.dir.is_dir():
        return fail(prog, f"--dir {args.dir}: not a directory", 2)
    rows: list[Row] = []
    if args.dir is None:
        rows.append(Row("client layouts", SKIP, "no --dir: run on a client with a Lustre "
                                                "directory"))
    else:
        rows += _layout_rows(args.dir, shim, args.keep, say)
    lctl, lnetctl = shlex.split(args.lctl_command), shlex.split(args.lnetctl_command)
    from lustre_alloc.collectors.sources import make_source
    sources = {role: make_source(args.source, role, args.root, lctl, lnetctl)
               for role in ("oss", "mds")}
    rows += stats_rows(sources)
    if args.steer:
        rows += _steer(args.steer, sources, args.root, lctl, args.steer_journal)
    if args.json:
        print(json.dumps([r.as_dict() for r in rows], indent=2))
    else:
        print(table(rows))
    return EXIT_FAILED if failed(rows) else 0


def _layout_rows(parent: Path, shim: Path, keep: bool, say: Callable[[str], None]) -> list[Row]:
    top = parent / f"lustre-alloc-selftest.{socket.gethostname()}.{os.getpid()}"
    try:
        top.mkdir()
    except OSError as exc:
        return [Row("client layouts", FAIL, f"cannot make {top}: {exc.strerror}")]
    say(f"test directory {top}")
    try:
        return LayoutChecks(top, shim, say).run()
    finally:
        if keep:
            say(f"kept {top}")
        else:
            _remove(top, say)


def _remove(top: Path, say: Callable[[str], None]) -> None:
    """Remove what the checks made: each check's directory and the files they create in
    it; anything else found there is left, and so is its directory."""
    for d in sorted(p for p in top.iterdir() if p.is_dir() and not p.is_symlink()):
        for name in MADE_NAMES:
            (d / name).unlink(missing_ok=True)
        try:
            d.rmdir()
        except OSError as exc:
            say(f"left {d}: {exc.strerror}")
    try:
        top.rmdir()
    except OSError as exc:
        say(f"left {top}: {exc.strerror}")


def _steer(ost: str, sources: dict, root: str, lctl: list[str], journal: str) -> list[Row]:
    """The steering check on every role whose source has ``ost``: its OSS (``degraded``),
    the MDS (a drain), both on a node that serves the OST and the MDT."""
    from lustre_alloc.collectors.lustre_params import osp_devices_of
    rows: list[Row] = []
    for role, source in sources.items():
        try:
            mine = (ost in source.targets("ost") if role == "oss" else
                    bool(osp_devices_of(ost, list(source.read_family("osp",
                                                                     "max_create_count")))))
        except Exception:  # noqa: BLE001 - unreadable here: try the other role
            mine = False
        if mine:
            rows += steer_rows(ost, role, source, params_for(source, root, lctl), journal)
    return rows or [Row(f"steer {ost}", FAIL, f"{ost} is neither an OST of this OSS nor an "
                                              f"OSP device of this MDS")]


if __name__ == "__main__":
    sys.exit(main())
