"""Moving existing data as a service: ``lustre-alloc-rebalance run``.

Evacuates OSTs the mapper steered for slowness (and, if asked, balances fill) with
``lfs migrate``, within a bandwidth, concurrency and data-in-flight budget, every move
journaled (:mod:`lustre_alloc.mapper.migrate.service`). The files and targets come from
:mod:`lustre_alloc.mapper.rebalance.planner`.
"""
