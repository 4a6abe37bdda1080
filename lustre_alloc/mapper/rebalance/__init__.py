"""Rebalancing existing data: plan ``lfs migrate`` moves for drift and expansion.

Placement (the rest of :mod:`mapper`) decides only at create time; this package plans
which existing files to move, where and in what order, under a bandwidth budget.
The heuristic follows Pufferscale (Cheriere et al., CCGrid 2020,
Section V); :mod:`lustre_alloc.mapper.rebalance.planner` says exactly what is taken from it.
"""
