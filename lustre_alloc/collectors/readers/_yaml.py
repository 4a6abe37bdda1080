"""YAML text of Lustre tools (``lnetctl ... show``, ``job_stats``) read with PyYAML.

Every scalar stays a string (PyYAML's ``BaseLoader``): Lustre's ids must not turn into numbers
(``job_id: 24``) or booleans (``job_id: on``), and each reader converts the fields it knows with
its own error. The document is composed into nodes so readers can name the line of a field.
Document markers (``---``, ``...``), flow style (``{ samples: 1, unit: reqs }``) and comments are
YAML and are accepted; anything PyYAML rejects becomes one line ``source:line: malformed YAML: ...``
in the reader's own error class.
"""
from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from lustre_alloc.common.errors import LustreStatsError


def compose(text: str, source: str, error: type[LustreStatsError]) -> Node | None:
    """The single YAML document of ``text`` as a node tree (``None`` for an empty text).

    Raises:
        error: malformed YAML (with the line PyYAML stopped at) or more than one document.
    """
    try:
        docs = list(yaml.compose_all(text, Loader=yaml.BaseLoader))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = " ".join(str(e.problem or e.context or "syntax error").split())
        raise error(f"malformed YAML: {problem}", source=source,
                    line=None if mark is None else mark.line + 1) from None
    except (yaml.YAMLError, RecursionError) as e:
        raise error(f"malformed YAML: {' '.join(str(e).split())[:200]}", source=source) from None
    docs = [d for d in docs if d is not None]
    if len(docs) > 1:
        raise error(f"{len(docs)} YAML documents, expected one", source=source,
                    line=docs[1].start_mark.line + 1)
    return docs[0] if docs else None


def line_of(node: Node) -> int:
    """1-based line where ``node`` starts."""
    return node.start_mark.line + 1


def plain(node: Node) -> Any:
    """Strings, lists and dicts of a node tree (scalars stay strings; a repeated key keeps the last)."""
    if isinstance(node, ScalarNode):
        return node.value
    if isinstance(node, SequenceNode):
        return [plain(n) for n in node.value]
    if isinstance(node, MappingNode):
        return {str(plain(k)): plain(v) for k, v in node.value}
    raise TypeError(f"unexpected YAML node {node!r}")  # pragma: no cover - composer makes only these


def mapping_items(node: Node) -> list[tuple[str, Node]]:
    """``(key, value node)`` pairs of a mapping node whose keys are scalars (others dropped)."""
    if not isinstance(node, MappingNode):
        return []
    return [(k.value, v) for k, v in node.value if isinstance(k, ScalarNode)]
