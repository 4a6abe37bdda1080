"""Real operational data shipped with lustre-alloc, as package data so it is inside the wheel.

Why a package of its own: the simulator's scenarios, the trace generators and the benchmarks all
read these files, so they live in one neutral home instead of inside one of their users; being an
importable package, ``importlib.resources`` finds them the same way in a checkout and in an
installed wheel. Each folder carries its ``SOURCES.md`` (origin, version, what changed) and the
upstream ``LICENSE``.

Scenarios name a shipped file with a package reference ``pkg:<package>/<path inside it>``, e.g.
``pkg:lustre_alloc_data/nersc-pytokio/sample_ost-fullness.txt.gz``; :func:`resource_path` turns
one into a filesystem path.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

PACKAGE_PREFIX = "pkg:"
"""Prefix of a package reference in a scenario file (``pkg:<package>/<path>``)."""


class DataFileError(FileNotFoundError):
    """A package reference names a package or a file that does not exist; message names which."""


def is_package_reference(raw: str) -> bool:
    """True when ``raw`` is a ``pkg:<package>/<path>`` reference rather than a filesystem path."""
    return raw.startswith(PACKAGE_PREFIX)


def resource_path(reference: str) -> Path:
    """Filesystem path of ``pkg:<package>/<path>`` (the package imported with importlib).

    Raises :class:`DataFileError` (one line naming the reference) when the reference is malformed,
    the package cannot be imported or the file is absent. Installed wheels unpack to directories,
    so the path is a real file that ``gzip``/``sqlite3`` can open.
    """
    if not is_package_reference(reference):
        raise DataFileError(f"{reference!r}: not a package reference (expected pkg:<package>/<path>)")
    package, _, inner = reference[len(PACKAGE_PREFIX):].partition("/")
    if not package or not inner:
        raise DataFileError(f"{reference!r}: expected pkg:<package>/<path inside the package>")
    try:
        root = resources.files(package)
    except ModuleNotFoundError:
        raise DataFileError(f"{reference!r}: package {package!r} is not installed") from None
    target = root.joinpath(*inner.split("/"))
    if not target.is_file():
        raise DataFileError(f"{reference!r}: no such file in package {package!r}")
    return Path(str(target))

