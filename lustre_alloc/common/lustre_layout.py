"""Lustre's user-space layouts, packed and parsed: ``lov_user_md`` v1/v3/SPECIFIC and the
composite ``lov_comp_md_v1`` (PFL, SEL), as ``LL_IOC_LOV_SETSTRIPE`` takes them and
``LL_IOC_LOV_GETSTRIPE`` returns them, and the two ioctl numbers for this machine.

Values and byte offsets are restated in docs/reference/lustre-client-layout-api.md from
lustre-release ``lustre/include/uapi/linux/lustre/lustre_user.h`` (little-endian, packed);
liblustre_alloc/lustre_layout_abi.h holds the same for the C shim.
"""
from __future__ import annotations

import platform
import struct
from dataclasses import dataclass, field

LOV_USER_MAGIC_V1 = 0x0BD10BD0
LOV_USER_MAGIC_V3 = 0x0BD30BD0
LOV_USER_MAGIC_SPECIFIC = 0x0BD50BD0
LOV_USER_MAGIC_COMP_V1 = 0x0BD60BD0
LOV_USER_MAGIC_SEL = 0x0BD80BD0
LOV_USER_MAGIC_FOREIGN = 0x0BD70BD0
LOV_PATTERN_RAID0 = 0x1
LOV_PATTERN_MDT = 0x100
LOV_PATTERN_OVERSTRIPING = 0x200
LOV_PATTERN_F_RELEASED = 0x80000000
LOV_OFFSET_DEFAULT = 0xFFFF
LCME_FL_INIT = 0x10
LCME_FL_EXTENSION = 0x40
LUSTRE_EOF = 0xFFFFFFFFFFFFFFFF
O_LOV_DELAY_CREATE = 0o400 | 0o20000  # O_NOCTTY | FASYNC (lustre_user.h)

_V1 = struct.Struct("<IIQQIHH")        # 32 bytes
_V3 = struct.Struct("<IIQQIHH16s")     # 48 bytes
_OST = struct.Struct("<QQII")          # lov_user_ost_data_v1, 24 bytes
_COMP = struct.Struct("<IIIHHH6sQ")    # lov_comp_md_v1 header, 32 bytes
_ENTRY = struct.Struct("<IIQQIIIQI")   # lov_comp_md_entry_v1, 48 bytes


def _iow(nr: int, size: int) -> int:
    """``_IOW('f', nr, long)`` for this machine (asm-generic/ioctl.h; powerpc's
    asm/ioctl.h: 13 size bits, _IOC_WRITE 4)."""
    if platform.machine().startswith(("ppc", "powerpc")):
        return (4 << 29) | (size << 16) | (ord("f") << 8) | nr
    return (1 << 30) | (size << 16) | (ord("f") << 8) | nr


LL_IOC_LOV_SETSTRIPE = _iow(154, struct.calcsize("l"))
LL_IOC_LOV_GETSTRIPE = _iow(155, struct.calcsize("l"))


def plain(stripe_count: int = 0, stripe_size: int = 0, pool: str = "",
          offset: int = LOV_OFFSET_DEFAULT, pattern: int = LOV_PATTERN_RAID0) -> bytes:
    """``lfs setstripe -c COUNT -S SIZE [-p POOL] [-i OFFSET]``: v1, or v3 with a pool.
    ``stripe_count`` -1 is every OST (0xffff), 0 the file system's default."""
    count = stripe_count & 0xFFFF
    if pool:
        return _V3.pack(LOV_USER_MAGIC_V3, pattern, 0, 0, stripe_size, count, offset,
                        pool.encode())
    return _V1.pack(LOV_USER_MAGIC_V1, pattern, 0, 0, stripe_size, count, offset)


def specific(osts: list[int], stripe_size: int, pool: str = "") -> bytes:
    """``lfs setstripe -o OSTS``: LOV_USER_MAGIC_SPECIFIC, the first listed as offset."""
    head = _V3.pack(LOV_USER_MAGIC_SPECIFIC, LOV_PATTERN_RAID0, 0, 0, stripe_size,
                    len(osts), osts[0] if osts else LOV_OFFSET_DEFAULT, pool.encode())
    return head + b"".join(_OST.pack(0, 0, 0, i) for i in osts)


@dataclass(frozen=True)
class Component:
    """One component of a composite layout: extent [start, end) in bytes."""

    start: int
    end: int
    blob: bytes
    flags: int = 0


def composite(components: list[Component], magic: int = LOV_USER_MAGIC_COMP_V1,
              mirror_count: int = 1) -> bytes:
    """``lfs setstripe -E END ... -E -1 ...`` (PFL); ``magic`` SEL for a self-extending one;
    ``mirror_count`` > 1 as ``lfs mirror create -N`` leaves it (FLR)."""
    table = _COMP.size + _ENTRY.size * len(components)
    entries, blobs = b"", b""
    for c in components:
        entries += _ENTRY.pack(0, c.flags, c.start, c.end, table + len(blobs), len(c.blob),
                               0, 0, 0)
        blobs += c.blob
    return _COMP.pack(magic, table + len(blobs), 0, 0, len(components), mirror_count - 1, b"",
                      0) + \
        entries + blobs


@dataclass
class Layout:
    """A layout as GETSTRIPE returns it. ``osts`` are the instantiated objects' OST
    indices; for a composite, ``components`` holds one Layout each (``start``/``end``
    bytes, ``initialized`` when it has objects)."""

    magic: int
    stripe_count: int = 0
    stripe_size: int = 0
    stripe_offset: int = LOV_OFFSET_DEFAULT
    pattern: int = 0
    pool: str = ""
    osts: list[int] = field(default_factory=list)
    components: list["Layout"] = field(default_factory=list)
    start: int = 0
    end: int = LUSTRE_EOF
    flags: int = 0
    mirror_count: int = 1
    """Mirrors of a composite layout (``lcm_mirror_count`` + 1; FLR files have more than 1)."""

    @property
    def initialized(self) -> bool:
        """A component with objects (LCME_FL_INIT)."""
        return bool(self.flags & LCME_FL_INIT)


def parse(buf: bytes) -> Layout:
    """A layout from GETSTRIPE's bytes. Raises ValueError naming what is wrong."""
    if len(buf) < 4:
        raise ValueError(f"layout: {len(buf)} bytes, not even a magic")
    (magic,) = struct.unpack_from("<I", buf)
    if magic in (LOV_USER_MAGIC_COMP_V1, LOV_USER_MAGIC_SEL):
        if len(buf) < _COMP.size:
            raise ValueError("composite layout: shorter than its 32-byte header")
        _, size, _, _, count, mirrors, _, _ = _COMP.unpack_from(buf)
        out = Layout(magic=magic, mirror_count=mirrors + 1)
        for i in range(count):
            off = _COMP.size + i * _ENTRY.size
            if off + _ENTRY.size > len(buf):
                raise ValueError(f"composite layout: entry {i} past the end")
            _, flags, start, end, boff, blen, _, _, _ = _ENTRY.unpack_from(buf, off)
            if boff + blen > len(buf):
                raise ValueError(f"composite layout: component {i}'s blob past the end")
            comp = parse(buf[boff:boff + blen])
            comp.start, comp.end, comp.flags = start, end, flags
            out.components.append(comp)
        return out
    if magic == LOV_USER_MAGIC_V1:
        head, pool = _V1, ""
    elif magic in (LOV_USER_MAGIC_V3, LOV_USER_MAGIC_SPECIFIC):
        head = _V3
    else:
        raise ValueError(f"layout: unknown magic {magic:#010x}")
    if len(buf) < head.size:
        raise ValueError(f"layout {magic:#010x}: shorter than its {head.size}-byte header")
    fields = head.unpack_from(buf)
    _, pattern, _, _, size, count, offset = fields[:7]
    if head is _V3:
        pool = fields[7].split(b"\0", 1)[0].decode(errors="replace")
    n_obj = min(count, (len(buf) - head.size) // _OST.size)
    osts = [_OST.unpack_from(buf, head.size + i * _OST.size)[3] for i in range(n_obj)]
    return Layout(magic=magic, stripe_count=count, stripe_size=size, stripe_offset=offset,
                  pattern=pattern, pool=pool, osts=osts)


def stored(osts: list[int], stripe_size: int, pool: str = "",
           pattern: int = LOV_PATTERN_RAID0, stripe_count: int | None = None) -> bytes:
    """A plain layout as a file holds it (``lustre.lov``, GETSTRIPE): ``lov_user_md_v1``, or
    v3 with a pool, then one ``lov_user_ost_data_v1`` per object on ``osts``.
    ``stripe_count`` defaults to ``len(osts)`` (a component not yet instantiated has a
    count and no objects)."""
    count = (len(osts) if stripe_count is None else stripe_count) & 0xFFFF
    offset = osts[0] if osts else LOV_OFFSET_DEFAULT
    if pool:
        head = _V3.pack(LOV_USER_MAGIC_V3, pattern, 0, 0, stripe_size, count, offset,
                        pool.encode())
    else:
        head = _V1.pack(LOV_USER_MAGIC_V1, pattern, 0, 0, stripe_size, count, offset)
    return head + b"".join(_OST.pack(0, 0, 0, i) for i in osts)


def pack(lay: Layout) -> bytes:
    """``lay`` back into the bytes :func:`parse` reads (composite or plain, as stored)."""
    if lay.components:
        return composite([Component(c.start, c.end, pack(c), c.flags) for c in lay.components],
                         lay.magic, lay.mirror_count)
    return stored(lay.osts, lay.stripe_size, lay.pool, lay.pattern, lay.stripe_count)


def getstripe_buffer(max_stripes: int = 2000) -> bytearray:
    """A GETSTRIPE argument: a v3 header whose stripe count says how many objects fit
    (llite/file.c ll_lov_getstripe reads it), large enough for a composite too."""
    buf = bytearray(65536)
    _V3.pack_into(buf, 0, LOV_USER_MAGIC_V3, 0, 0, 0, 0, min(max_stripes, 0xFFFF), 0, b"")
    return buf
