"""Per-target values of a scenario: one number per OST (or OSS), given four ways.

A per-target key of ``[cluster]`` (``ost_bandwidth_mib_s``, ``ost_read_bandwidth_mib_s``,
``ost_latency_ms``, ``oss_nic_mib_s``, ``oss_cpu_mib_s``) takes:

* a number: every target the same (today's uniform cluster);
* a list: one value per target, in OST index (or OSS) order;
* a seeded distribution: ``{ distribution = "lognormal", median = 600, sigma = 0.1, seed = 3 }``
  (``lognormal``: ``median * exp(sigma * N(0,1))``; ``uniform``: ``low``..``high``);
* values derived from a real LMT database:
  ``{ derived = "lmt:<file>", statistic = "lifetime_bytes", median = 700, seed = 3 }``:
  :func:`lustre_alloc.traces.lmt.ost_spread` (the statistic per OST over the database, normalised
  to its median) times ``median``; when the cluster has as many OSTs as the database
  the values are taken in OST order, otherwise drawn from them with ``seed``
  (a bootstrap resample: the measured spread, not the measured OSTs).

Optional ``min``/``max`` clip the result. Values are validated (finite, > 0 unless the
key allows 0) with one-line errors naming the key.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

DISTRIBUTIONS = ("lognormal", "uniform")


class TargetValueError(ValueError):
    """A bad per-target value; ``str()`` is ``key: reason`` (the caller adds the file)."""


@dataclass(frozen=True)
class TargetValues:
    """A parsed per-target value (not yet sized to the cluster).

    Attributes:
        key: the scenario key (for errors).
        constant: the value when given as a number.
        values: the list when given as a list.
        spec: the table when given as a distribution or ``derived``.
        path: the LMT database for ``derived``.
    """
    key: str
    constant: float | None = None
    values: tuple[float, ...] = ()
    spec: tuple[tuple[str, Any], ...] = ()
    path: Path | None = None

    @property
    def is_constant(self) -> bool:
        return self.constant is not None

    def resolve(self, n: int, allow_zero: bool = False) -> np.ndarray:
        """The values for ``n`` targets, shape (n,).

        Raises:
            TargetValueError: list of the wrong length, a value out of range, an unreadable
                LMT database.
        """
        if self.constant is not None:
            out = np.full(n, self.constant)
        elif self.values:
            if len(self.values) != n:
                raise TargetValueError(f"{self.key}: has {len(self.values)} values for {n} targets")
            out = np.array(self.values, dtype=float)
        else:
            spec = dict(self.spec)
            rng = np.random.default_rng(int(spec.get("seed", 0)))
            if "derived" in spec:
                from lustre_alloc.traces.lmt import LmtError, ost_spread, read_lmt
                try:
                    spread = ost_spread(read_lmt(self.path), str(spec.get("statistic", "lifetime_bytes")))
                except LmtError as e:
                    raise TargetValueError(f"{self.key}: {e}") from None
                if len(spread) != n:
                    spread = rng.choice(spread, size=n, replace=True)
                out = float(spec["median"]) * spread
            elif spec["distribution"] == "lognormal":
                out = float(spec["median"]) * np.exp(float(spec.get("sigma", 0.0)) * rng.standard_normal(n))
            else:
                out = rng.uniform(float(spec["low"]), float(spec["high"]), size=n)
            if "min" in spec:
                out = np.maximum(out, float(spec["min"]))
            if "max" in spec:
                out = np.minimum(out, float(spec["max"]))
        bad = ~np.isfinite(out) | (out < 0) | ((out == 0) & (not allow_zero))
        if bad.any():
            i = int(np.nonzero(bad)[0][0])
            raise TargetValueError(f"{self.key}: value {out[i]!r} for target {i} must be "
                                   f"{'>= 0' if allow_zero else '> 0'} and finite")
        return out


def parse_target_values(key: str, raw: Any, expand: Callable[[str], Path],
                        allow_zero: bool = False) -> TargetValues:
    """Parse one per-target key (syntax only; sizes are checked by :meth:`TargetValues.resolve`).

    ``expand`` turns a file name from the scenario into a path. Raises TargetValueError.
    """
    low = 0.0 if allow_zero else None

    def num(name: str, v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise TargetValueError(f"{name}: expected a number, got {v!r}")
        if v < 0 or (v == 0 and low is None):
            raise TargetValueError(f"{name}: must be {'>= 0' if allow_zero else '> 0'}, got {v}")
        return float(v)

    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return TargetValues(key, constant=num(key, raw))
    if isinstance(raw, list):
        if not raw:
            raise TargetValueError(f"{key}: empty list")
        return TargetValues(key, values=tuple(num(f"{key}[{i}]", v) for i, v in enumerate(raw)))
    if not isinstance(raw, dict):
        raise TargetValueError(f"{key}: expected a number, a list, or a table "
                               f"(distribution or derived), got {raw!r}")
    known = {"distribution", "derived", "statistic", "median", "sigma", "low", "high", "seed",
             "min", "max"}
    for k in raw:
        if k not in known:
            raise TargetValueError(f"{key}.{k}: unknown key (known: {', '.join(sorted(known))})")
    if ("distribution" in raw) == ("derived" in raw):
        raise TargetValueError(f"{key}: a table needs exactly one of 'distribution' or 'derived'")
    for k in ("median", "sigma", "low", "high", "min", "max"):
        if k in raw:
            num(f"{key}.{k}", raw[k]) if k != "sigma" else None
            if k == "sigma" and (not isinstance(raw[k], (int, float)) or raw[k] < 0):
                raise TargetValueError(f"{key}.sigma: must be a number >= 0, got {raw[k]!r}")
    if "seed" in raw and (isinstance(raw["seed"], bool) or not isinstance(raw["seed"], int)):
        raise TargetValueError(f"{key}.seed: expected an integer, got {raw['seed']!r}")
    path = None
    if "derived" in raw:
        src = raw["derived"]
        if not isinstance(src, str) or not src.startswith("lmt:"):
            raise TargetValueError(f"{key}.derived: expected 'lmt:<file>', got {src!r}")
        if "median" not in raw:
            raise TargetValueError(f"{key}.median: missing (the value the median OST gets)")
        from lustre_alloc.traces.lmt import STATISTICS
        stat = raw.get("statistic", "lifetime_bytes")
        if stat not in STATISTICS:
            raise TargetValueError(f"{key}.statistic: unknown {stat!r} (known: {', '.join(STATISTICS)})")
        path = expand(src[len("lmt:"):])
        if not path.is_file():
            raise TargetValueError(f"{key}.derived: LMT database not found: {path}")
    else:
        dist = raw["distribution"]
        if dist not in DISTRIBUTIONS:
            raise TargetValueError(f"{key}.distribution: unknown {dist!r} (known: {', '.join(DISTRIBUTIONS)})")
        need = ("median",) if dist == "lognormal" else ("low", "high")
        for k in need:
            if k not in raw:
                raise TargetValueError(f"{key}.{k}: missing for distribution {dist!r}")
        if dist == "uniform" and raw["low"] > raw["high"]:
            raise TargetValueError(f"{key}: low {raw['low']} > high {raw['high']}")
    return TargetValues(key, spec=tuple(sorted(raw.items())), path=path)
