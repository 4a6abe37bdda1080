"""Whether an application's predicted requests may join a round: its measured accuracy.

A predicted OST list that its request never uses holds capacity for nothing (its stripes
count as pending load until they expire). Per application (jobid) the gate counts used
and wasted lists; below ``min_accuracy`` the application is no longer predicted, except
for a probe every ``window``-th round so that it can earn its place back (ours).
"""
from __future__ import annotations

from collections import OrderedDict


class PredictionGate:
    """Per-jobid prediction accuracy and the rule that reads it.

    Args:
        min_accuracy: share of used lists below which an application is not predicted
            (0: always predict).
        min_trials: lists judged before the accuracy is trusted.
        window: outcomes after which the counts halve; also the probe period.
        max_apps: applications remembered, at most (the oldest are forgotten).
    """

    def __init__(self, min_accuracy: float, min_trials: int, window: int, max_apps: int):
        self.min_accuracy = min_accuracy
        self.min_trials = min_trials
        self.window = window
        self.max_apps = max_apps
        self.accuracy: OrderedDict[str, tuple[float, float]] = OrderedDict()
        """jobid -> (lists used, lists judged), halved every ``window`` outcomes."""
        self._probe: dict[str, int] = {}

    def score(self, jobid: str, hit: bool) -> None:
        """Count one predicted list of ``jobid`` as used (hit) or wasted (its request did
        not match). Counts halve every ``window`` outcomes, so the accuracy follows the
        application's recent behaviour."""
        h, n = self.accuracy.get(jobid, (0.0, 0.0))
        if n >= self.window:
            h, n = h / 2, n / 2
        self.accuracy[jobid] = (h + (1.0 if hit else 0.0), n + 1.0)
        while len(self.accuracy) > self.max_apps:
            self.accuracy.pop(next(iter(self.accuracy)))

    def may_predict(self, jobid: str) -> bool:
        """True while ``jobid``'s accuracy (used lists / lists judged) is at least
        ``min_accuracy``; an application is trusted until ``min_trials`` lists were
        judged, and one below the threshold is probed every ``window``-th call."""
        if self.min_accuracy <= 0:
            return True
        h, n = self.accuracy.get(jobid, (0.0, 0.0))
        if n < self.min_trials or h / n >= self.min_accuracy:
            return True
        probe = self._probe.get(jobid, 0) + 1
        self._probe[jobid] = probe % self.window
        if len(self._probe) > self.max_apps:
            self._probe.pop(next(iter(self._probe)))
        return probe >= self.window
