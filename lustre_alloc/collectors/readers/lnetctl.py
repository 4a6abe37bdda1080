"""Reader for ``lnetctl stats show`` (YAML).

Real example (Lustre 2.14/2.15, ``lnetctl stats show``, abridged)::

    statistics:
        msgs_alloc: 0
        msgs_max: 39
        rst_alloc: 15
        errors: 0
        send_count: 1110532
        recv_count: 1110512
        drop_count: 11
        send_length: 261865376
        recv_length: 254091008
        drop_length: 4832

Keys (lnet/utils/lnetctl.c, ``jt_show_stats``): 2.10 prints the same 11 counters as the LNet
``stats`` file (see :mod:`lustre_alloc.collectors.readers.lnet_stats`); 2.12+ adds ``rst_alloc``,
``resend_count``, ``response_timeout_count``, ``local_{interrupt,dropped,aborted,no_route,
timeout,error}_count``, ``remote_{dropped,error,timeout}_count``, ``network_timeout_count``.
Counts are messages, ``*_length`` are bytes. The text is YAML (``lnetctl`` prints it with libyaml)
and is read with PyYAML (:mod:`lustre_alloc.collectors.readers._yaml`): document markers and flow style are
accepted. Unknown integer keys are kept; keys whose value is not a non-negative integer are ignored.
"""
from __future__ import annotations

from yaml.nodes import ScalarNode

from lustre_alloc.common.errors import LnetctlError
from lustre_alloc.collectors.readers._yaml import compose, line_of, mapping_items


def parse_lnetctl_stats(text: str, source: str = "<text>") -> dict[str, int]:
    """Counters of ``lnetctl stats show`` by name (messages, or bytes for ``*_length``).

    Raises:
        LnetctlError: malformed YAML (one line: source, line, PyYAML's reason), no
            ``statistics`` mapping at the top, or no integer counter in it.
    """
    root = compose(text, source, LnetctlError)
    if root is None:
        raise LnetctlError("empty text, expected 'statistics:'", source=source)
    top = dict(mapping_items(root))
    if "statistics" not in top:
        raise LnetctlError("expected a 'statistics:' mapping at the top", source=source,
                           line=line_of(root))
    block = top["statistics"]
    values: dict[str, int] = {}
    for name, node in mapping_items(block):
        if isinstance(node, ScalarNode) and _is_count(node.value):
            values[name] = int(node.value)
    if not values:
        raise LnetctlError("no counters under 'statistics:'", source=source, line=line_of(block),
                           field="statistics")
    return values


def _is_count(value: str) -> bool:
    # at most 20 digits: a u64 counter (and no huge int() conversion on garbage)
    return 0 < len(value) <= 20 and value.isascii() and value.isdigit()
