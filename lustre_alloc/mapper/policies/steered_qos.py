"""``qos_steer``: Lustre's own allocator (QOS, round-robin while space is balanced, as
restated in :mod:`lustre_alloc.mapper.policies.lustre_qos`) under the steering controller's actions.

This is what every create on a file system gets when the mapper steers Lustre instead of
answering clients. It is the simulator's row for steering: the engine feeds
:meth:`SteeredQos.observe` every sample interval (as the mapper's steering loop is fed live)
and :meth:`SteeredQos.allocate` only applies the actions in force. The mapper service refuses
it as a placement policy: live, LOD places and ``[steer]`` acts on it. the controller (:class:`lustre_alloc.mapper.steer.controller.SteerController`) decides,
from the snapshot's samples only, which OSTs to flag ``degraded`` or to drain, and LOD
allocates with those flags set. The simulator runs it beside the other policies; the mapper
service runs the same controller in its ``[steer]`` loop (:mod:`lustre_alloc.mapper.steer.service`).

Simplification, stated: an action reaches LOD as soon as it is decided here; live it takes an
``lctl`` call and the next statfs (seconds, against the controller's minutes of dwell).
"""
from __future__ import annotations

from typing import Any

from lustre_alloc.mapper.policies.lustre_qos import LustreQos
from lustre_alloc.mapper.policies.placement import CreateRequest, Placement
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot
from lustre_alloc.mapper.steer.controller import SteerController, SteerParams

EVALUATE_EVERY_S = 5.0
"""Seconds between controller evaluations: the collectors' sampling interval (Section III-A)."""


class SteeredQos:
    """Lustre's QOS allocator (default LOD settings) under the steering controller.

    Args:
        seed: QOS's random seed.
        params: ``[steer]`` keys (:class:`SteerParams`); ``mode`` defaults to ``on`` here
            (``dry_run``: decide and count, apply nothing; ``off``: plain QOS).
    Raises:
        ValueError: a steer key out of range.
    """

    name = "qos_steer"

    def __init__(self, seed: int = 0, **params: Any):
        self.params = SteerParams(**{"mode": "on", **params}).check()
        self.qos = LustreQos(seed=seed)
        self.controller = SteerController(self.params)
        self._last_eval_s: float | None = None
        self.log: list[tuple[float, str, int, str]] = []
        """Every action: (time s, ``apply``/``undo``, OST index, reason)."""

    def allocate(self, snapshot: ClusterSnapshot, request: CreateRequest) -> Placement:
        """QOS's placement under the actions in force.

        Raises:
            AllocationError: as Lustre's QOS allocator.
        """
        if self.params.mode == "off":
            placement = self.qos.allocate(snapshot, request)
            return Placement(placement.osts, self.name, placement.note)
        view = snapshot if self.params.mode == "dry_run" else self.controller.steered_view(snapshot)
        placement = self.qos.allocate(view, request)
        note = f"steered {placement.note}".strip() if view is not snapshot else placement.note
        return Placement(placement.osts, self.name, note)

    def observe(self, snapshot: ClusterSnapshot) -> None:
        """Evaluate the controller on ``snapshot`` (at most every :data:`EVALUATE_EVERY_S`
        of ``snapshot.time_s``), logging its actions in :attr:`log`."""
        now = snapshot.time_s
        if self.params.mode == "off" or (self._last_eval_s is not None
                                         and now - self._last_eval_s < EVALUATE_EVERY_S):
            return
        self._last_eval_s = now
        decision = self.controller.evaluate(snapshot, now)
        self.log += [(now, "apply", a.ost, a.reason) for a in decision.apply]
        self.log += [(now, "undo", a.ost, a.reason) for a in decision.undo]

    def steering_actions(self) -> list[dict[str, Any]]:
        """The controller's actions in force, as dicts (a dry run steers nothing)."""
        if self.params.mode != "on":
            return []
        return [a.as_dict() for a in self.controller.active.values()]

    def steering_speed_ratios(self) -> dict[int, float]:
        return self.controller.tracker.ratios_to_median()

    def action_counts(self) -> dict[str, int]:
        """Actions taken so far: ``applied``, ``undone``, ``renewed``, ``refused``."""
        return dict(self.controller.counts)
