"""A setting is a promise to an admin: its unit, its default and what chose that default are
kept on the dataclass field that holds it, and the tables an admin reads are generated from
them (``scripts/settings_tables.py --write`` fills docs/operations.md and docs/rebalance.md; a
test keeps the docs and the packaged examples equal to the code).

    from lustre_alloc.common.settings import setting

    @dataclass
    class Config:
        interval_s: float = setting(5.0, unit="s", doc="sampling interval",
                                    source="Paul et al. 2017, Section III-A")

A field with ``development=True`` is a test or development switch: it is left out of the
admin's table, and the mapper reads it only from flags or the ``[development]`` table.
"""
from __future__ import annotations

import dataclasses
from dataclasses import MISSING, dataclass
from typing import Any, Callable, Iterator

KEY = "lustre_alloc.setting"
"""The field-metadata key holding a setting's :class:`About`."""


@dataclass(frozen=True)
class About:
    """What an admin is told about one setting.

    Attributes:
        unit: the unit (``s``, ``MiB/s``, ``x the median``, ``endpoint``, ``true/false``...).
        doc: what it does, one or two sentences.
        source: the measurement, paper or Lustre source that chose the default (``""``: a
            plain choice, e.g. a port).
        development: a test or development switch, not an admin setting.
        shown: the default as the table prints it (``""``: the default's TOML text).
    """
    unit: str
    doc: str
    source: str = ""
    development: bool = False
    shown: str = ""


def setting(default: Any = MISSING, *, unit: str, doc: str, source: str = "",
            factory: Callable[[], Any] | None = None, development: bool = False,
            shown: str = "") -> Any:
    """A dataclass field carrying its :class:`About` (arguments as there).

    Args:
        default: the default value (use ``factory`` for a list or a dict; neither: a key
            every configuration must give, shown as "required").
        factory: builds a mutable default.
    Raises:
        TypeError: both ``default`` and ``factory``.
    """
    if default is not MISSING and factory is not None:
        raise TypeError("setting() takes a default or a factory, not both")
    if default is MISSING and factory is None:
        about = About(unit, doc, source, development, shown or "required")
        return dataclasses.field(metadata={KEY: about})
    about = About(unit, doc, source, development, shown)
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata={KEY: about})
    return dataclasses.field(default=default, metadata={KEY: about})


def about(f: dataclasses.Field) -> About | None:
    """The field's :class:`About`, or None for a field that is not a setting."""
    return f.metadata.get(KEY)


def settings_of(cls: type, *, development: bool = False) -> Iterator[tuple[dataclasses.Field, About]]:
    """The fields of dataclass ``cls`` that are settings, in declaration order: the admin's
    (``development=False``) or the development switches (True)."""
    for f in dataclasses.fields(cls):
        a = about(f)
        if a is not None and a.development == development:
            yield f, a


def default_of(f: dataclasses.Field) -> Any:
    """The field's default value (a fresh one for a factory; :data:`dataclasses.MISSING` for
    a required key)."""
    if f.default_factory is not MISSING:          # type: ignore[misc]
        return f.default_factory()                # type: ignore[misc]
    return f.default


def toml_value(value: Any) -> str:
    """``value`` as TOML writes it (strings quoted, booleans lower case, lists and tables
    inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, float):
        text = repr(value)
        return text if ("e" in text or "." in text or "inf" in text) else text + ".0"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    return str(value)
