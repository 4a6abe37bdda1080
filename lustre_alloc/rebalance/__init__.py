"""Rebalancing existing data with ``lfs migrate``: the ``lustre-alloc-rebalance`` command.

Placement (:mod:`lustre_alloc.mapper`) decides only at create time; this package moves files
that already exist. Its parts:

* the plan (:mod:`.plan`, :mod:`.plan_inputs`, :mod:`.plan_command`): which files move to
  which OSTs, in what order, under a bandwidth budget, for drift and expansion; the heuristic
  follows Pufferscale (Cheriere et al., CCGrid 2020, Section V), and :mod:`.plan` says
  exactly what is taken from it; ``lustre-alloc-rebalance plan`` writes it for review;
* the migration service (:mod:`.service` and its parts :mod:`.selection`, :mod:`.budget`,
  :mod:`.journal`, :mod:`.runner`, :mod:`.keep`, :mod:`.lfs`, :mod:`.robinhood`,
  :mod:`.windows`, :mod:`.admin`, :mod:`.config`): ``lustre-alloc-rebalance run`` evacuates
  the OSTs the mapper steered for slowness (and, if asked, balances fill) with the plan's
  choices, within a bandwidth, concurrency and data-in-flight budget, every move journaled.

It runs on a Lustre client with the file system mounted and asks the mapper through its
admin socket, so it sits beside the mapper, not inside it.
"""
