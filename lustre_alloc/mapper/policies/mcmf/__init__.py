"""MCMF: the mapper's placement policy (Paul et al. 2017, Section III-C/D): Lustre's
round-robin while the OSTs look alike, a min-cost flow over their measured speeds when
they do not, lists planned ahead, an order-3 Markov predictor of each job's requests.

:mod:`~lustre_alloc.mapper.policies.mcmf.policy` is the policy (:class:`McmfPolicy`); its parts, each
named by what it does: :mod:`~lustre_alloc.mapper.policies.mcmf.params` (the settings),
:mod:`~lustre_alloc.mapper.policies.mcmf.ost_view` (the OSTs as a round sees them),
:mod:`~lustre_alloc.mapper.policies.mcmf.regime` (round-robin or the flow),
:mod:`~lustre_alloc.mapper.policies.mcmf.request_round` (a request round's flow),
:mod:`~lustre_alloc.mapper.policies.mcmf.planner` and :mod:`~lustre_alloc.mapper.policies.mcmf.plan_queues` (lists
planned ahead), :mod:`~lustre_alloc.mapper.policies.mcmf.kept_lists` and
:mod:`~lustre_alloc.mapper.policies.mcmf.prediction_gate` (predicted lists),
:mod:`~lustre_alloc.mapper.policies.mcmf.placed_books` (what it handed out) and
:mod:`~lustre_alloc.mapper.policies.mcmf.learned_state` (what it saves).
"""
from lustre_alloc.mapper.policies.mcmf.params import McmfParams
from lustre_alloc.mapper.policies.mcmf.policy import PREDICT_ROUND_S, McmfFlowOnly, McmfPolicy

__all__ = ["PREDICT_ROUND_S", "McmfFlowOnly", "McmfParams", "McmfPolicy"]
