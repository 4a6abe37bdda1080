"""Policy registry: build a placement policy by name (the names the CLI and scenarios use)."""
from __future__ import annotations

from typing import Any, Callable

from mapper.policies.lustre_qos import LustreQos
from mapper.policies.mcmf import McmfFlowOnly, McmfPolicy
from mapper.policies.placement import PlacementPolicy
from mapper.policies.random_policy import WeightedRandom
from mapper.policies.round_robin import RoundRobin

POLICIES: dict[str, Callable[..., PlacementPolicy]] = {
    "round_robin": RoundRobin,
    "lustre_qos": LustreQos,
    "random": WeightedRandom,
    "mcmf": McmfPolicy,
    "mcmf_flow": McmfFlowOnly,
}
BASELINES = ("round_robin", "lustre_qos", "random")


class UnknownPolicyError(ValueError):
    """A policy name that is not registered."""


def make_policy(name: str, seed: int = 0, **params: Any) -> PlacementPolicy:
    """A fresh policy instance.

    Args:
        name: a key of :data:`POLICIES`.
        seed: the policy's random seed.
        params: policy-specific parameters (e.g. ``weight_version="2.15"`` for QOS).
    Raises:
        UnknownPolicyError: unknown name (the message lists the known ones).
        TypeError: a parameter the policy does not take.
    """
    try:
        factory = POLICIES[name]
    except KeyError:
        raise UnknownPolicyError(
            f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))}") from None
    return factory(seed=seed, **params)
