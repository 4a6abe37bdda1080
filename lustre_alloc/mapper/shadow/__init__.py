"""Shadow mode: the mapper decides every request in scope as usual, books
nothing, and answers "use Lustre's allocator"; the shim reports the layout Lustre chose
(``op: "report"``, docs/protocol.md). The ledger (:mod:`lustre_alloc.mapper.shadow.ledger`) pairs both
choices; the report (:mod:`lustre_alloc.mapper.shadow.report`) compares them over a window."""
