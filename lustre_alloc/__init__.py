"""lustre-alloc: load-balancing OST allocation for Lustre (docs/architecture.md).

One import package per distribution: the collectors (``lustre_alloc.collectors``), the mapper
(``lustre_alloc.mapper``), the simulator (``lustre_alloc.simulator``), the trace tools
(``lustre_alloc.traces``), the emulated stack (``lustre_alloc.livestack``) and what they share
(``lustre_alloc.common``); real data files ship in ``lustre_alloc_data``.
"""
