"""The global mapper: cluster state, placement policies, predictor and flow placement.

Runs on the MDS (Paul et al. 2017, Section III, Fig. 4). The simulator drives these same
modules; there is no second copy of any policy.
"""
