"""The selftest's layout checks: files created under the shim on the admin's Lustre
directory, each read back with ``LL_IOC_LOV_GETSTRIPE`` and held to Lustre's rules
(docs/reference/lustre-semantics.md; the rule numbers below are that table's).

Each check makes a directory of its own under the selftest's, sets its default layout as
``lfs setstripe DIR`` does (``LL_IOC_LOV_SETSTRIPE`` for a plain one; the ``lustre.lov``
xattr for a composite one, which llite/dir.c answers EOPNOTSUPP through the ioctl), points
the stand-in mapper (:class:`~lustre_alloc.selftest.responder.ListResponder`) at a list, and runs
a Python child under the shim (``LD_PRELOAD``, ``LUSTRE_ALLOC_PATHS`` = that directory)
that creates and writes one file. The OSTs a list may name come from a probe file striped
over every OST by Lustre's own allocator (``lfs setstripe -c -1``, rule 5: the OSTs that
can take objects).
"""
from __future__ import annotations

import errno
import fcntl
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lustre_alloc.common import lustre_layout as ll
from lustre_alloc.common.record_file import read_records
from lustre_alloc.selftest.responder import ListResponder
from lustre_alloc.selftest.rows import FAIL, PASS, Row

MIB = 1 << 20
SEL_UNIT_BYTES = 1024
"""``SEL_UNIT_SIZE`` (lustre_user.h): the unit of an extension component's size."""
FILE_BYTES = 64 << 10
PFL_BYTES = 2 * MIB + (64 << 10)
"""Written to the PFL file: past its first component's end (1 MiB), so the second one is
instantiated by that write (rule 9)."""
CHILD = """\
import errno, os, sys
path, size = sys.argv[1], int(sys.argv[2])
try:
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    chunk = bytes(65536)
    left = size
    while left > 0:
        left -= os.write(fd, chunk[:min(left, len(chunk))])
    os.close(fd)
    print("OK")
except OSError as e:
    print("ERR " + errno.errorcode.get(e.errno, str(e.errno)))
    sys.exit(3)
"""
"""The application: create one file, write it, close it (a write error is the failure
the shim must never cause: rule 1)."""


class NotLustre(Exception):
    """The directory is not on a Lustre client mount (GETSTRIPE: ENOTTY)."""


LOV_XATTR = "lustre.lov"
"""A file's whole layout as an xattr (what liblustreapi's ``llapi_layout_get_by_fd`` reads):
GETSTRIPE with a v1/v3 header answers a composite file with its last instantiated component
only (lov_pack.c ``lov_getstripe()``)."""


def getstripe(path: Path) -> ll.Layout | None:
    """``lfs getstripe PATH``: a file's whole layout (the ``lustre.lov`` xattr), a
    directory's default (the ioctl); None when it has none (ENODATA).

    Raises:
        NotLustre: not on Lustre (ENOTTY, EINVAL, no such xattr namespace).
        OSError: anything else.
    """
    if not path.is_dir():
        try:
            return ll.parse(os.getxattr(path, LOV_XATTR))
        except OSError as exc:
            if exc.errno == errno.ENODATA:
                return None
            if exc.errno in (errno.EOPNOTSUPP, errno.ENOTTY, errno.EINVAL):
                raise NotLustre(f"{path}: not on a Lustre client mount "
                                f"({LOV_XATTR}: {errno.errorcode[exc.errno]})") from None
            raise
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0))
    try:
        buf = ll.getstripe_buffer()
        fcntl.ioctl(fd, ll.LL_IOC_LOV_GETSTRIPE, buf)
    except OSError as exc:
        if exc.errno == errno.ENODATA:
            return None
        if exc.errno in (errno.ENOTTY, errno.EINVAL):
            raise NotLustre(f"{path}: not on a Lustre client mount "
                            f"(GETSTRIPE: {errno.errorcode[exc.errno]})") from None
        raise
    finally:
        os.close(fd)
    return ll.parse(bytes(buf))


def setstripe(path: Path, lum: bytes) -> None:
    """``lfs setstripe`` on a directory (its default) or on a file without a layout. A
    composite default on a directory goes through the ``lustre.lov`` xattr, as liblustreapi
    sets it (``llapi_layout_file_open()``): LL_IOC_LOV_SETSTRIPE on a directory takes only a
    v1/v3 layout (llite/dir.c, EOPNOTSUPP otherwise; seen on 2.17.0)."""
    magic = int.from_bytes(lum[:4], "little")
    if path.is_dir() and magic in (ll.LOV_USER_MAGIC_COMP_V1, ll.LOV_USER_MAGIC_SEL):
        os.setxattr(path, LOV_XATTR, lum)
        return
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0))
    try:
        fcntl.ioctl(fd, ll.LL_IOC_LOV_SETSTRIPE, bytearray(lum))
    finally:
        os.close(fd)


def effective_default(directory: Path) -> ll.Layout | None:
    """The default a new file in ``directory`` gets (rule 6): its own, else the nearest
    ancestor's that answers; clients before 2.13.51 answer ENODATA for a directory without
    one (rule 8), and the mount root always answers (``lod_xattr_get``)."""
    d = directory
    while True:
        try:
            got = getstripe(d)
        except NotLustre:
            return None
        if got is not None:
            return got
        if d.parent == d:
            return None
        d = d.parent


def probe_osts(directory: Path) -> list[int]:
    """The OSTs Lustre's allocator can use now: a probe file striped over all of them
    (``lfs setstripe -c -1``), its layout read back, the file removed.

    Raises:
        NotLustre: ``directory`` is not on a Lustre client mount.
        OSError: the probe could not be created or striped.
    """
    getstripe(directory)                # NotLustre before anything is created
    probe = directory / ".ost-probe"
    fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY | ll.O_LOV_DELAY_CREATE, 0o600)
    try:
        fcntl.ioctl(fd, ll.LL_IOC_LOV_SETSTRIPE, bytearray(ll.plain(-1, MIB)))
    finally:
        os.close(fd)
    try:
        got = getstripe(probe)
        return sorted(got.osts) if got is not None else []
    finally:
        probe.unlink()


def _osts(layout: ll.Layout | None) -> list[int]:
    if layout is None:
        return []
    return layout.components[0].osts if layout.components else layout.osts


def _count_of(layout: ll.Layout | None, n_osts: int) -> int:
    """The stripe count a default gives (first component of a composite); 0 unknown."""
    if layout is None:
        return 0
    first = layout.components[0] if layout.components else layout
    count = first.stripe_count
    return n_osts if count in (0xFFFF, -1) else min(count, n_osts)


@dataclass
class Created:
    """One file a check created: the child's verdict, its layout, the shim's record."""
    path: Path
    wrote: str
    layout: ll.Layout | None
    reason: str


class LayoutChecks:
    """The layout checks under ``top`` (a directory this run made and owns).

    Args:
        top: the selftest's own directory on Lustre.
        shim: path of ``liblustre_alloc.so``.
        log: receives one line per step (``--verbose``).
    """

    def __init__(self, top: Path, shim: Path, log: Callable[[str], None] = lambda s: None):
        self.top = top
        self.shim = shim
        self.log = log
        self.osts: list[int] = []

    def run(self) -> list[Row]:
        """Every layout check, in order; a check that cannot run is a FAIL naming why."""
        try:
            self.osts = probe_osts(self.top)
        except NotLustre as exc:
            return [Row("lustre mount", FAIL, str(exc))]
        except OSError as exc:
            return [Row("lustre mount", FAIL, f"cannot stripe a probe file over every OST "
                                              f"in {self.top}: {exc}")]
        if not self.osts:
            return [Row("lustre mount", FAIL, "the probe file got no OST")]
        rows = [Row("lustre mount", PASS, f"{self.top}: {len(self.osts)} OSTs take objects")]
        with ListResponder() as mapper:
            for check in (self.explicit_list, self.refused_list, self.leased_list,
                          self.plain_default, self.pfl_default, self.sel_default):
                try:
                    rows.append(check(mapper))
                except OSError as exc:
                    rows.append(Row(check.__name__.replace("_", " "), FAIL, str(exc)))
        rows.append(self.no_mapper())
        return rows

    # -- the checks ----------------------------------------------------------------------
    def _pick(self, n: int) -> list[int]:
        """``n`` OSTs a mapper could name (the last ones: round-robin starts elsewhere)."""
        return self.osts[-n:][::-1]

    def _default_count(self, directory: Path) -> int:
        """The stripe count a new file in ``directory`` gets (at least 1): a list for it is
        that long (a longer one the shim refuses, docs/client.md)."""
        return max(1, _count_of(effective_default(directory), len(self.osts)))

    def explicit_list(self, mapper: ListResponder) -> Row:
        """A list Lustre accepts is the file's layout, in stripe order (rule 3, 4)."""
        directory = self._dir("explicit-list")
        want = self._pick(self._default_count(directory))
        mapper.answer_with(want)
        f = self._create("explicit-list", mapper.endpoint, lease=False, directory=directory)
        got = _osts(f.layout)
        return self._row("explicit list", f, got == want,
                         f"asked {_names(want)}, got {_names(got)}")

    def refused_list(self, mapper: ListResponder) -> Row:
        """A list Lustre must refuse (an OST index past the last: EINVAL, rule 4) leaves a
        writable file laid out by Lustre's own allocator with the request's count."""
        bad = max(self.osts) + 1
        mapper.answer_with([bad])
        directory = self._dir("refused-list")
        count = _count_of(effective_default(directory), len(self.osts))
        f = self._create("refused-list", mapper.endpoint, lease=False, directory=directory)
        got = _osts(f.layout)
        ok = bool(got) and bad not in got and (count == 0 or len(got) == count) \
            and f.reason.startswith("setstripe_rejected:") and f.reason.endswith("+default_layout")
        return self._row("refused list", f, ok,
                         f"mapper named OST{bad:04x}; shim: {f.reason or 'no record'}; "
                         f"layout {_names(got)} (default count {count or '?'})")

    def leased_list(self, mapper: ListResponder) -> Row:
        """A leased list (the shim's default, protocol v2) is the file's layout."""
        directory = self._dir("leased-list")
        want = self._pick(self._default_count(directory))
        mapper.answer_with(want)
        before = len(mapper.asked)
        f = self._create("leased-list", mapper.endpoint, lease=True, directory=directory)
        leased = any(a.op == "lease" for a in mapper.asked[before:])
        got = _osts(f.layout)
        return self._row("leased list", f, leased and got == want,
                         f"lease asked: {'yes' if leased else 'no'}; asked {_names(want)}, "
                         f"got {_names(got)}")

    def plain_default(self, mapper: ListResponder) -> Row:
        """Under ``lfs setstripe -c 2 -S 2M DIR`` the shim asks for 2 stripes of 2 MiB and the
        file gets them on the mapper's OSTs (rule 6)."""
        count = min(2, len(self.osts))
        directory = self._dir("plain-default", ll.plain(count, 2 * MIB))
        want = self._pick(count)
        mapper.answer_with(want)
        before = len(mapper.asked)
        f = self._create("plain-default", mapper.endpoint, lease=False, directory=directory)
        asked = mapper.asked[before:]
        got = f.layout
        ok = (bool(asked) and asked[0].stripe_count == count
              and asked[0].stripe_size == 2 * MIB and got is not None
              and got.stripe_size == 2 * MIB and _osts(got) == want)
        return self._row("plain default", f, ok,
                         f"asked the mapper for {asked[0].stripe_count if asked else '-'} x "
                         f"{(asked[0].stripe_size >> 20) if asked else '-'} MiB; layout "
                         f"{_names(_osts(got))}, {(got.stripe_size >> 20) if got else '-'} MiB")

    def pfl_default(self, mapper: ListResponder) -> Row:
        """Under a PFL default (``-E 1M -c 1 -E -1 -c 2``) the first component is on the
        mapper's OST; the second is instantiated by Lustre when the write reaches it, and
        that write succeeds (rule 9)."""
        second = min(2, len(self.osts))
        directory = self._dir("pfl-default", ll.composite([
            ll.Component(0, MIB, ll.plain(1, MIB)),
            ll.Component(MIB, ll.LUSTRE_EOF, ll.plain(second, MIB))]))
        want = self._pick(1)
        mapper.answer_with(want)
        f = self._create("pfl-default", mapper.endpoint, lease=False, directory=directory,
                         size=PFL_BYTES)
        comps = f.layout.components if f.layout is not None else []
        ok = (len(comps) == 2 and comps[0].osts == want and comps[1].initialized
              and len(comps[1].osts) == second)
        seen = "; ".join(f"[{c.start >> 20}M, {'EOF' if c.end == ll.LUSTRE_EOF else c.end >> 20}"
                         f"{'' if c.end == ll.LUSTRE_EOF else 'M'}) {_names(c.osts)}"
                         for c in comps)
        return self._row("PFL default", f, ok, f"components: {seen or 'none'}")

    def sel_default(self, mapper: ListResponder) -> Row:
        """A self-extending default is passed to Lustre untouched: no mapper request, the
        file reads back as a composite with its extension component (rule 10)."""
        # lfs setstripe -E -1 -c 1 -z 64M, as lfs sets it (a COMP_V1 layout whose
        # extension component has no stripes): its lmm_stripe_size is the extension size
        # in SEL_UNIT_SIZE (1 KiB) units (lustre_user.h; lod_object.c); a template with
        # the LOV_USER_MAGIC_SEL magic is refused EINVAL (seen on 2.17.0)
        directory = self._dir("sel-default", ll.composite([
            ll.Component(0, 64 * MIB, ll.plain(1, MIB)),
            ll.Component(64 * MIB, ll.LUSTRE_EOF, ll.plain(0, 64 * MIB // SEL_UNIT_BYTES),
                         ll.LCME_FL_EXTENSION)]))
        mapper.answer_with(self._pick(1))
        before = len(mapper.asked)
        f = self._create("sel-default", mapper.endpoint, lease=False, directory=directory)
        asked = len(mapper.asked) - before
        comps = f.layout.components if f.layout is not None else []
        extension = any(c.flags & ll.LCME_FL_EXTENSION for c in comps)
        return self._row("SEL default", f, asked == 0 and extension,
                         f"mapper asked {asked} times; extension component "
                         f"{'kept' if extension else 'missing'}; shim: {f.reason or 'no record'}")

    def no_mapper(self) -> Row:
        """With no mapper answering, the file gets the effective default (the shim's
        timeout, then Lustre's allocator)."""
        directory = self._dir("no-mapper")
        count = _count_of(effective_default(directory), len(self.osts))
        f = self._create("no-mapper", _closed_endpoint(), lease=False, directory=directory,
                         timeout_ms=200)
        got = _osts(f.layout)
        ok = bool(got) and (count == 0 or len(got) == count)
        return self._row("no mapper", f, ok,
                         f"layout {_names(got)} (default count {count or '?'}); "
                         f"shim: {f.reason or 'no record'}")

    # -- plumbing ------------------------------------------------------------------------
    def _dir(self, name: str, default: bytes | None = None) -> Path:
        d = self.top / name
        if not d.exists():
            d.mkdir()
            if default is not None:
                setstripe(d, default)
        return d

    def _create(self, name: str, endpoint: str, *, lease: bool, directory: Path | None = None,
                size: int = FILE_BYTES, timeout_ms: int = 5000) -> Created:
        directory = directory or self._dir(name)
        path = directory / "file"
        record = directory / "shim-record.tsv"
        env = {k: v for k, v in os.environ.items() if not k.startswith("LUSTRE_ALLOC_")}
        env["LD_PRELOAD"] = f"{self.shim} {env.get('LD_PRELOAD', '')}".strip()
        env.update(LUSTRE_ALLOC_MAPPER=endpoint, LUSTRE_ALLOC_PATHS=str(directory),
                   LUSTRE_ALLOC_TIMEOUT_MS=str(timeout_ms), LUSTRE_ALLOC_LEASE=str(int(lease)),
                   LUSTRE_ALLOC_RECORD=str(record), LUSTRE_ALLOC_JOBID="lustre-alloc-selftest")
        proc = subprocess.run([sys.executable, "-c", CHILD, str(path), str(size)], env=env,
                              capture_output=True, text=True, timeout=120)
        wrote = (proc.stdout.strip().splitlines() or [proc.stderr.strip()[-200:] or "no output"])[-1]
        self.log(f"{name}: {path} {wrote}")
        layout = getstripe(path) if path.exists() else None
        reasons = [r["reason"] for r in read_records(record) if r["path"] == str(path)] \
            if record.exists() else []
        return Created(path, wrote, layout, reasons[-1] if reasons else "")

    @staticmethod
    def _row(check: str, f: Created, ok: bool, detail: str) -> Row:
        if f.wrote != "OK":
            return Row(check, FAIL, f"the application's write failed: {f.wrote}; {detail}")
        if f.layout is None:
            return Row(check, FAIL, f"the file has no layout; {detail}")
        return Row(check, PASS if ok else FAIL, detail)


def _names(osts: list[int]) -> str:
    return ",".join(f"OST{i:04x}" for i in osts) or "none"


def _closed_endpoint() -> str:
    """A loopback TCP port nothing listens on."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"
