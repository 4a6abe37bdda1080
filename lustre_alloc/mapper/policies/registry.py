"""Policy registry: the one factory that builds a placement policy from a name and its
parameters (the names and ``policy_params`` tables the mapper's configuration, the CLI and
the scenarios use).

:func:`build_policy` is what the mapper service and the simulator both call, so a policy
tuned in a scenario (``[policy_params.mcmf]``) runs the same way in production
(``[policy.mcmf]`` of the mapper's TOML, docs/operations.md).
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Mapping

from lustre_alloc.mapper.policies.gate import GatedPolicy
from lustre_alloc.mapper.policies.lustre_qos import LustreQos, LustreQosTunables
from lustre_alloc.mapper.policies.mcmf import McmfFlowOnly, McmfPolicy
from lustre_alloc.mapper.policies.mcmf.params import McmfParams, params_from_table
from lustre_alloc.mapper.policies.placement import PlacementPolicy
from lustre_alloc.mapper.policies.random_policy import WeightedRandom
from lustre_alloc.mapper.policies.round_robin import RoundRobin
from lustre_alloc.mapper.policies.steered_qos import SteeredQos
from lustre_alloc.mapper.steer.controller import SteerParams

POLICIES: dict[str, Callable[..., PlacementPolicy]] = {
    "round_robin": RoundRobin,
    "lustre_qos": LustreQos,
    "random": WeightedRandom,
    "mcmf": McmfPolicy,
    "mcmf_flow": McmfFlowOnly,
    "qos_steer": SteeredQos,
}
PARAMS: dict[str, type] = {"mcmf": McmfParams, "mcmf_flow": McmfParams, "qos_steer": SteerParams,
                           "lustre_qos": LustreQosTunables}
"""Policies whose parameters are a dataclass (the keys a ``[policy.<name>]`` table takes)."""
SIMULATION_ONLY = {
    "oracle": "a simulation-only reference: it reads the simulator's true state (every OST's "
              "bandwidth now, the bytes in flight, each file's true size), which no mapper "
              "has (lustre_alloc/simulator/oracle.py)"}
"""Policies the simulator runs and the mapper never can, with why."""
BASELINES = ("round_robin", "lustre_qos", "random")
DEFAULT_FALLBACK = "lustre_qos"
"""The gate's fallback unless told otherwise: Lustre's own allocator (Section III-D)."""
GATE_PARAMS = ("fallback", "mds_cpu_limit_percent")
"""``policy_params`` keys that configure the MDS CPU gate around the policy, not the policy
(scenarios only; the mapper's TOML sets them as ``[mapper]`` keys)."""

PolicyParams = Mapping[str, Mapping[str, Any]]
"""Policy name -> keyword parameters of its constructor (a TOML table per policy)."""


class UnknownPolicyError(ValueError):
    """A policy name that is not registered."""


class PolicyParamError(ValueError):
    """A policy parameter the policy does not take, or a value it refuses."""


def _check_name(name: str) -> Callable[..., PlacementPolicy]:
    if name in SIMULATION_ONLY:
        raise UnknownPolicyError(f"policy {name!r} is {SIMULATION_ONLY[name]}")
    try:
        return POLICIES[name]
    except KeyError:
        raise UnknownPolicyError(
            f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))}") from None


def policy_param_names(name: str) -> tuple[str, ...]:
    """The keyword parameters policy ``name`` takes (besides ``seed``), sorted.

    A policy of :data:`PARAMS` takes its dataclass's fields; any other, its constructor's
    keywords (a constructor that forwards ``**params`` to its base class takes its
    base's parameters too).

    Raises:
        UnknownPolicyError: unknown name.
    """
    factory = _check_name(name)
    if name in PARAMS:
        return tuple(sorted(f.name for f in dataclasses.fields(PARAMS[name])))
    names: set[str] = set()
    classes = factory.__mro__ if isinstance(factory, type) else (factory,)
    for cls in classes:
        init = cls.__init__ if isinstance(cls, type) else cls
        if init is object.__init__:
            break
        params = inspect.signature(init).parameters.values()
        names.update(p.name for p in params
                     if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    names.discard("self")
    names.discard("seed")
    return tuple(sorted(names))


def policy_kwargs(name: str, table: Mapping[str, Any], where: str = "policy"
                  ) -> tuple[dict[str, Any], list[str]]:
    """Policy ``name``'s ``[<where>.<name>]`` table as constructor keywords, and the
    experimental keys it set. MCMF's table holds its admin settings at the top and its
    experiments under ``[<where>.mcmf.experimental]``
    (:func:`lustre_alloc.mapper.policies.mcmf.params.params_from_table`); the gate's keys
    (:data:`GATE_PARAMS`) pass through; other policies' tables are their keywords.

    Raises:
        PolicyParamError: a key misplaced or unknown (one line naming it).
    """
    if PARAMS.get(name) is not McmfParams:
        return dict(table), []
    gate = {k: v for k, v in table.items() if k in GATE_PARAMS}
    try:
        own, experimental = params_from_table(
            {k: v for k, v in table.items() if k not in GATE_PARAMS}, f"{where}.{name}")
    except ValueError as exc:
        raise PolicyParamError(str(exc)) from None
    return {**own, **gate}, experimental


def check_policy_params(name: str, params: Mapping[str, Any], where: str = "policy") -> None:
    """Reject a key policy ``name`` does not take, with one line naming it
    (``<where>.<name>.<key>``).

    Raises:
        UnknownPolicyError: unknown name.
        PolicyParamError: an unknown key (the message lists the known ones).
    """
    known = policy_param_names(name)
    for key in params:
        if key not in known:
            raise PolicyParamError(f"{where}.{name}.{key}: unknown parameter of {name}; "
                                   f"known: {', '.join(known) or '(none)'}")


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
    return _check_name(name)(seed=seed, **params)


def build_policy(name: str, policy_params: PolicyParams | None = None, *, seed: int = 0,
                 gate: bool | None = None, fallback: str | None = None,
                 **gate_kwargs: Any) -> PlacementPolicy:
    """The policy ``name`` built with ``policy_params[name]``, behind the MDS CPU gate when
    asked.

    Args:
        name: a key of :data:`POLICIES`.
        policy_params: policy name -> constructor parameters (also used for the fallback).
            The gate keys of :data:`GATE_PARAMS` in the primary's table configure the gate.
        seed: the random seed of the primary and the fallback.
        gate: True = always wrap in :class:`GatedPolicy` (the service); None = only a
            policy that asks for it (``needs_gate``: the mapper's MCMF; the simulator);
            False = never.
        fallback: the gate's fallback policy name (overrides the table's ``fallback``;
            default :data:`DEFAULT_FALLBACK`).
        gate_kwargs: further :class:`GatedPolicy` arguments (override the table's).
    Raises:
        UnknownPolicyError: an unknown primary or fallback name.
        PolicyParamError: a parameter the policy does not take, or a value it refuses
            (the message names the policy and the key when it can).
    """
    tables = policy_params or {}
    params, _ = policy_kwargs(name, tables.get(name, {}))
    gate_opts = {k: params.pop(k) for k in GATE_PARAMS if k in params}
    primary = _make_checked(name, seed, params)
    if gate is False or (gate is None and not getattr(primary, "needs_gate", False)):
        return primary
    fallback_name = fallback or gate_opts.pop("fallback", DEFAULT_FALLBACK)
    gate_opts.pop("fallback", None)
    fallback_params = {k: v for k, v in policy_kwargs(fallback_name,
                                                      tables.get(fallback_name, {}))[0].items()
                       if k not in GATE_PARAMS}
    fallback_policy = _make_checked(fallback_name, seed, fallback_params)
    return GatedPolicy(primary, fallback_policy, **{**gate_opts, **gate_kwargs})


def _make_checked(name: str, seed: int, params: dict[str, Any]) -> PlacementPolicy:
    check_policy_params(name, params)
    try:
        return make_policy(name, seed=seed, **params)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, UnknownPolicyError):
            raise
        raise PolicyParamError(f"policy.{name}: {exc}") from exc
