"""What a move keeps: the ``lfs migrate`` options that re-create a file's layout with only its
OSTs changed, and which layouts no such options can keep.

``lfs migrate`` builds the new layout from its options alone; the old one is copied only
when no layout option is given (``lustre/utils/lfs.c`` ``lfs_setstripe_internal()``, every
release since 2.10), so a move that names OSTs must restate everything else:

* **plain**: ``-c K -S SIZE [-p POOL] -o I,J,..``;
* **composite (PFL, DoM)**: one ``-E END`` group per component, in extent order, each with
  its own ``-c``/``-S``/``-p`` and, when the component has objects, its new ``-o`` list
  (``comp_args_to_layout()``: an OST list per component since 2.12.0, where 2.12-2.14 also
  require ``-c`` to equal the list's length, which is always given here). A component not
  yet instantiated keeps its count, size, pool and start index and gets no list: LOD places
  it when a write reaches it, as before. A Data-on-MDT component is ``-E END -L mdt`` and
  nothing else (``comp_args_to_layout()`` refuses a count, list, index or pool on it); the
  same DoM size keeps the plain layout swap (``lfs_migrate()``: only a larger DoM size
  takes the mirror path).
* **pool**: ``-p`` is given with the list (without it the pool is dropped:
  ``comp_args_to_layout()`` clears it; seen on 2.17.0). A listed OST outside the pool is
  refused, EINVAL, the file left as it was (seen on 2.17.0), so targets are chosen among the
  pool's OSTs (:func:`allowed_targets`).

Not movable by options, so skipped and counted (:func:`unmovable`): mirrored files (FLR:
options build one mirror, merging the others away; ``lfs mirror`` is the tool), self-extending
components (SEL: an extension component is a different object each time it grows),
overstriped components (an OST repeats in the list), components with flags other than
"instantiated" (FLR's ``stale``/``prefer``/``nosync``, compression), HSM-released files
(no objects), foreign layouts.

OST numbers change as a mapping ``old -> new`` applied to every component, so a file whose
components share OSTs keeps that sharing, and no component gets an OST twice.
"""
from __future__ import annotations

from typing import Callable, Mapping

from lustre_alloc.common import lustre_layout as ll

EOF_ARG = "-1"
"""``-E -1``: the component reaches the end of the file (LUSTRE_EOF)."""

MDT_PATTERN_ARGS = ("-L", "mdt")


def _parts(lay: ll.Layout) -> list[ll.Layout]:
    return lay.components or [lay]


def unmovable(lay: ll.Layout) -> str | None:
    """Why no ``lfs migrate`` options can move ``lay`` keeping it (module doc), or None."""
    if lay.magic == ll.LOV_USER_MAGIC_FOREIGN:
        return "foreign layout"
    if lay.mirror_count > 1:
        return "mirrored (FLR)"
    if lay.magic == ll.LOV_USER_MAGIC_SEL:
        return "self-extending (SEL)"
    for c in _parts(lay):
        if c.flags & ll.LCME_FL_EXTENSION:
            return "self-extending (SEL)"
        if c.flags & ~ll.LCME_FL_INIT:
            return f"component flags {c.flags:#x}"
        if c.pattern & ll.LOV_PATTERN_F_RELEASED:
            return "released (HSM)"
        if c.pattern & ll.LOV_PATTERN_OVERSTRIPING:
            return "overstriped"
        if c.pattern & ~(ll.LOV_PATTERN_RAID0 | ll.LOV_PATTERN_MDT):
            return f"pattern {c.pattern:#x}"
    return None


def objects(lay: ll.Layout) -> list[int]:
    """The OSTs the file has objects on, each once, in order of first appearance (the list
    a move changes: :func:`remap`)."""
    seen: list[int] = []
    for c in _parts(lay):
        for o in c.osts:
            if o not in seen:
                seen.append(int(o))
    return seen


def pools(lay: ll.Layout) -> set[str]:
    """The pools named by the file's components (empty: none)."""
    return {c.pool for c in _parts(lay) if c.pool}


def stripe_size(lay: ll.Layout) -> int:
    """The stripe size of the file's largest instantiated OST component, bytes (what the
    planner prices a stripe at); 0 when none has objects."""
    sizes = [c.stripe_size for c in _parts(lay) if c.osts]
    return max(sizes, default=0)


def allowed_targets(lay: ll.Layout, pool_osts: Callable[[str], set[int]]) -> set[int] | None:
    """The OSTs the file may move to: those in every pool it names (None: any).

    Raises whatever ``pool_osts`` raises for a pool it cannot list."""
    allowed: set[int] | None = None
    for name in sorted(pools(lay)):
        members = set(pool_osts(name))
        allowed = members if allowed is None else allowed & members
    return allowed


def remap(old: list[int], new: list[int]) -> dict[int, int]:
    """``old[k] -> new[k]``: the planner's new list for the file's :func:`objects`.

    Raises ValueError when the lists differ in length or ``new`` repeats an OST."""
    if len(old) != len(new) or len(set(new)) != len(new):
        raise ValueError(f"a move from {old} to {new}: lists must be as long and distinct")
    return dict(zip(old, new))


def _size_arg(n: int) -> str:
    return str(int(n))


def migrate_options(lay: ll.Layout, new_of: Mapping[int, int]) -> list[str]:
    """The ``lfs migrate`` layout options re-creating ``lay`` with OST ``o`` replaced by
    ``new_of[o]`` (OSTs absent from ``new_of`` stay). Raises ValueError for a layout
    :func:`unmovable` refuses."""
    why = unmovable(lay)
    if why is not None:
        raise ValueError(f"cannot keep a {why} layout")
    if not lay.components:
        return _plain_options(lay, new_of)
    args: list[str] = []
    for c in lay.components:
        args += ["-E", EOF_ARG if c.end == ll.LUSTRE_EOF else _size_arg(c.end)]
        if c.pattern & ll.LOV_PATTERN_MDT:
            args += list(MDT_PATTERN_ARGS)
            continue
        args += _plain_options(c, new_of)
    return args


def _plain_options(c: ll.Layout, new_of: Mapping[int, int]) -> list[str]:
    args: list[str] = []
    if c.osts:
        osts = [int(new_of.get(o, o)) for o in c.osts]
        args += ["-c", str(len(osts))]
    elif c.stripe_count:
        args += ["-c", "-1" if c.stripe_count == 0xFFFF else str(c.stripe_count)]
    if c.stripe_size:
        args += ["-S", _size_arg(c.stripe_size)]
    if c.pool:
        args += ["-p", c.pool]
    if c.osts:
        args += ["-o", ",".join(str(o) for o in osts)]
    elif c.stripe_offset != ll.LOV_OFFSET_DEFAULT:
        args += ["-i", str(c.stripe_offset)]
    return args


def shape(lay: ll.Layout) -> tuple:
    """Everything of ``lay`` a move must keep: per component its extent, stripe count and
    size, pattern, pool and whether it has objects; not its OSTs (what a move changes) nor
    its stripe offset (the first OST)."""
    return (lay.mirror_count, tuple((c.start, c.end, c.stripe_count, c.stripe_size, c.pattern,
                                     c.pool, bool(c.osts)) for c in _parts(lay)))
