"""One reader per Lustre statistics source (pytokio ``connectors`` style).

Each module parses the text of one source and shows a real example of it in its docstring:

=====================  ===========================================================
module                 source
=====================  ===========================================================
``stats_file``         ``obdfilter.*.stats``, ``mdt.*.md_stats`` (counters + units)
``brw_stats``          ``osd-*.*.brw_stats`` histograms (I/O time, disk I/O size...)
``job_stats``          ``obdfilter.*.job_stats``, ``mdt.*.job_stats`` (YAML per job)
``kbytes``             ``kbytesfree``/``kbytestotal``/``kbytesavail``/``files*``
``lnet_stats``         ``/proc/sys/lnet/stats`` or debugfs ``lnet/stats`` (11 numbers)
``lnetctl``            ``lnetctl stats show`` (YAML)
``lctl_get_param``     ``lctl get_param`` dumps, split into per-parameter texts
``health_check``       ``health_check`` (``healthy`` or unhealthy devices)
``host_load``          CPU%, memory%, load average (psutil)
=====================  ===========================================================

Parsers take the text and a ``source`` label for error context, and raise only their own
subclass of :class:`lustre_alloc.common.errors.LustreStatsError`.
"""
