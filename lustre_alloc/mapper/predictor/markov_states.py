"""Quantisation of write bytes into the five Markov states, and back (Algorithm 1).

Paul et al. 2017, Section III-B and Algorithm 1: the bytes a request writes are modelled as
a normal distribution N(mu, sd) cut into five bands of equal probability 0.2. The cut
points are the normal quantiles Phi^-1(0.6) = 0.2533 and Phi^-1(0.8) = 0.8416, which the
paper rounds to 0.25 and 0.85 standard deviations (``assignStates``)::

    state  band of x (bytes)                        back to bytes (statesToPrediction)
     -2    x <  mu - 0.85 sd                        mu - 1.7 sd
     -1    mu - 0.85 sd <= x <  mu - 0.25 sd        mu - 0.5 sd
      0    mu - 0.25 sd <= x <= mu + 0.25 sd        mu
     +1    mu + 0.25 sd <  x <= mu + 0.85 sd        mu + 0.5 sd
     +2    x >  mu + 0.85 sd                        mu + 1.7 sd

The inequalities (which side of each cut point is closed) are exactly Algorithm 1's. With
``sd == 0`` every band but the middle one is empty: ``x == mu`` is state 0, anything else
is +/-2 (which only happens when the caller's mu/sd do not describe x; the predictor's
statistics always include the request being quantised, so there it is always 0).

The representative values 0.5 and 1.7 are the paper's constants (Section III-B: "the values
where a normal line meets the mean slope of the respective region"). They are *not* the
conditional means of the bands (those are 0.53 and 1.40 sd); we keep the paper's values.

States are the paper's integers -2..+2 in the public API; internally the predictor indexes
arrays with ``state + 2`` (0..4), see :data:`N_STATES`.
"""
from __future__ import annotations

import math

N_STATES = 5
"""Number of states (Section III-B, Fig. 9)."""
STATES = (-2, -1, 0, 1, 2)
"""The paper's state labels, in index order (index = state + 2)."""
INNER_CUT_SD = 0.25
"""Band edge between states 0 and +/-1, in standard deviations (Algorithm 1, ~Phi^-1(0.6))."""
OUTER_CUT_SD = 0.85
"""Band edge between states +/-1 and +/-2, in standard deviations (Algorithm 1, ~Phi^-1(0.8))."""
INNER_VALUE_SD = 0.5
"""Bytes offset of states +/-1 from the mean, in sd (Algorithm 1, ``statesToPrediction``)."""
OUTER_VALUE_SD = 1.7
"""Bytes offset of states +/-2 from the mean, in sd (Algorithm 1, ``statesToPrediction``)."""
STATE_OFFSETS_SD = (-OUTER_VALUE_SD, -INNER_VALUE_SD, 0.0, INNER_VALUE_SD, OUTER_VALUE_SD)
"""``statesToPrediction`` offsets indexed by ``state + 2``."""


def state_index(x: float, mu: float, sd: float) -> int:
    """Algorithm 1 ``assignStates`` for one request, as an index 0..4 (= state + 2).

    Args:
        x: bytes written by the request (>= 0).
        mu: mean of the observed bytes, bytes.
        sd: standard deviation of the observed bytes, bytes (>= 0).
    """
    lo_in = mu - INNER_CUT_SD * sd
    hi_in = mu + INNER_CUT_SD * sd
    if lo_in <= x <= hi_in:
        return 2
    if mu - OUTER_CUT_SD * sd <= x < lo_in:
        return 1
    if hi_in < x <= mu + OUTER_CUT_SD * sd:
        return 3
    if x < mu - OUTER_CUT_SD * sd:
        return 0
    return 4


def assign_state(x: float, mu: float, sd: float) -> int:
    """Algorithm 1 ``assignStates`` for one request: the state -2..+2 of ``x`` bytes."""
    return state_index(x, mu, sd) - 2


def assign_states(xs: list[float], mu: float, sd: float) -> list[int]:
    """Algorithm 1 ``assignStates`` for a set of requests (states -2..+2, same order)."""
    return [state_index(x, mu, sd) - 2 for x in xs]


def state_to_bytes(state: int, mu: float, sd: float) -> float:
    """Algorithm 1 ``statesToPrediction`` for one state -2..+2: predicted bytes (may be < 0).

    Raises:
        ValueError: ``state`` is not one of -2..+2.
    """
    if state not in STATES:
        raise ValueError(f"state must be one of -2..2, got {state!r}")
    return mu + STATE_OFFSETS_SD[state + 2] * sd


def predicted_write_bytes(index: int, mu: float, sd: float) -> int:
    """Bytes a request in state ``index - 2`` is predicted to write: the Algorithm 1 value,
    rounded to whole bytes and clamped at 0 (mu - 1.7 sd is negative for skewed sizes)."""
    value = mu + STATE_OFFSETS_SD[index] * sd
    return int(value + 0.5) if value > 0.0 else 0


def stripe_count_for(nbytes: int, stripe_size: int, max_stripe_count: int,
                     usable_osts: int) -> int:
    """Stripe count for a file of ``nbytes`` with a fixed stripe size (Section III-B).

    "Dividing the number of write bytes by the stripe size gives us the stripe count": we
    round up (a partial stripe still occupies an OST object), never go below 1 (Lustre
    always creates at least one object, also for a 0-byte or read-only file), and clip to
    ``max_stripe_count`` and to ``usable_osts`` (LOD never places two stripes of a file on
    one OST, ``lod_qos.c``). The result is 0 only when ``usable_osts`` is 0.

    Args:
        nbytes: predicted bytes (>= 0).
        stripe_size: bytes per stripe (> 0).
        max_stripe_count: configured ceiling (>= 1), e.g. the pool size or LOV_MAX_STRIPE_COUNT.
        usable_osts: OSTs usable right now (>= 0).
    """
    count = -(-nbytes // stripe_size) if nbytes > 0 else 1
    count = max(count, 1)
    return min(count, max_stripe_count, usable_osts)


def is_valid_bytes(x: float) -> bool:
    """A learnable byte count: finite and >= 0 (NaN, +/-inf and negatives are not)."""
    return math.isfinite(x) and x >= 0
