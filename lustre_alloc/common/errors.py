"""Exception classes of the collectors, one per parser, all carrying where the problem was.

Every reader raises only its own subclass of :class:`LustreStatsError` (a ``ValueError``), with
the source (file path or ``lctl`` parameter name), the 1-based line number and the field when
known. The collector catches :class:`LustreStatsError` and :class:`SourceUnavailable`, marks the
OST or counter unavailable with ``str(exc)`` as the reason, and keeps going.
"""
from __future__ import annotations


class CollectorError(Exception):
    """Base of every error raised by ``collectors``."""


class SourceUnavailable(CollectorError):
    """A statistics source is missing, a dangling symlink, unreadable, or a command failed.

    Attributes:
        source: the path or command that could not be read.
        reason: short machine-friendly reason (``missing``, ``permission``, ``io``, ``command``).
    """

    def __init__(self, source: str, reason: str, detail: str = "") -> None:
        self.source = source
        self.reason = reason
        self.detail = detail
        msg = f"{source}: {reason}"
        super().__init__(f"{msg} ({detail})" if detail else msg)


class LustreStatsError(CollectorError, ValueError):
    """Text of a Lustre statistics source that cannot be parsed.

    Attributes:
        source: file path or ``lctl`` parameter name the text came from.
        line: 1-based line number, or ``None`` when the whole text is at fault.
        field: name of the field being parsed, when known.
    """

    def __init__(self, message: str, *, source: str = "<text>", line: int | None = None,
                 field: str | None = None) -> None:
        self.source = source
        self.line = line
        self.field = field
        where = source if line is None else f"{source}:{line}"
        if field:
            where += f" [{field}]"
        super().__init__(f"{where}: {message}")


class StatsFileError(LustreStatsError):
    """An ``obdfilter.*.stats`` / ``mdt.*.md_stats`` style counters file is garbled."""


class BrwStatsError(LustreStatsError):
    """A ``brw_stats`` histogram file is garbled."""


class JobStatsError(LustreStatsError):
    """A ``job_stats`` YAML file is garbled."""


class SingleValueError(LustreStatsError):
    """A one-number file (``kbytesfree``, ``filesfree``, ``degraded``...) is garbled."""


class LnetStatsError(LustreStatsError):
    """The 11-number LNet ``stats`` file is garbled."""


class LnetctlError(LustreStatsError):
    """``lnetctl stats show`` output is garbled."""


class LctlParamError(LustreStatsError):
    """``lctl get_param`` output cannot be split into parameters."""


class HealthCheckError(LustreStatsError):
    """The ``health_check`` file is garbled."""


class SchemaError(CollectorError, ValueError):
    """A message does not follow the published schema (docs/protocol.md)."""


class ConfigError(CollectorError, ValueError):
    """A configuration file or flag is invalid."""


class OspParamError(LustreStatsError):
    """An ``osp.*.{active,max_create_count,prealloc_status}`` value that is not one integer."""


class LodPoolError(LustreStatsError):
    """A ``lod.*.pools.<pool>`` line that is not an OST UUID."""
