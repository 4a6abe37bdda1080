"""The mcmf policy's learned state file: the Markov predictor's applications
(:mod:`lustre_alloc.mapper.predictor.markov_store`) and, under ``ost_rates``, the OST rate memory
(:mod:`lustre_alloc.mapper.speed.rate_memory`), in one document written atomically."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from lustre_alloc.mapper.speed.rate_memory import (OST_RATES_KEY, RateMemoryError, export_rate_memory,
                                     restore_rate_memory)
from lustre_alloc.mapper.speed.rates import OstRateTracker
from lustre_alloc.mapper.predictor.markov import MarkovConfig, MarkovPredictor
from lustre_alloc.mapper.predictor.markov_store import (predictor_from_document, read_state_document,
                                          save_predictor)

log = logging.getLogger("lustre_alloc.mapper.policies.mcmf.learned_state")


def learned_extras(tracker: OstRateTracker) -> dict[str, Any]:
    """What is saved beside the predictor's records: the OST rate memory."""
    return {OST_RATES_KEY: export_rate_memory(tracker)}


def save_learned(predictor: MarkovPredictor, tracker: OstRateTracker, path: str | Path) -> Path:
    """Write the predictor and ``tracker``'s memory to ``path`` atomically; the path.

    Raises:
        OSError: the directory is not writable (the previous file, if any, is untouched).
    """
    return save_predictor(predictor, path, learned_extras(tracker))


def load_learned(path: str | Path, config: MarkovConfig | None,
                 tracker: OstRateTracker) -> tuple[MarkovPredictor, int]:
    """The predictor saved at ``path``, with the OST rate memory saved with it restored into
    ``tracker``; (predictor, records skipped as unusable). A malformed ``ost_rates``
    document counts one, is logged, and loses nothing else; the tracker is touched only
    once the predictor has loaded.

    Raises:
        PredictorStateError: missing, corrupt or incompatible file.
    """
    doc = read_state_document(path)
    predictor = predictor_from_document(path, doc, config)
    skipped = predictor.stats.skipped_on_load
    try:
        skipped += restore_rate_memory(tracker, doc.get(OST_RATES_KEY))
    except RateMemoryError as exc:
        log.warning("%s: ost_rates skipped: %s", path, exc,
                    extra={"event": "ost_rates_skipped", "path": str(path), "reason": str(exc)})
        skipped += 1
    return predictor, skipped
