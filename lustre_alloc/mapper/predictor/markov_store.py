"""The predictor's state file: save what the Markov predictor learned, load it after a restart.

A JSON document, written atomically (temporary file in the same directory, then
``os.replace``), so a mapper killed mid-save leaves the previous file intact::

    {"format": "lustre-alloc-markov-predictor", "version": 1,
     "config": {"order": 3, "train_lengths": [], "max_train_length": 16, "history": 64,
                "max_apps": 4096, "mse_decay": 0.125},
     "apps": [{"job_id": "ior.4242", "n_obs": 120, "ctx": 62,
               "hist": [67108864, ...], "trans": [312, ...], "mse": [0.0, 0.0, 0.0],
               "mse_n": 116}, ...]}

``apps`` is least recently observed first, so loading keeps the eviction order. ``hist``
holds the last ``history`` byte counts, ``trans`` the last transitions as
``context * 5 + next state index``; everything else is rebuilt from them
(:meth:`lustre_alloc.mapper.predictor.markov.MarkovPredictor.import_app`).

The mapper saves other learned state in the same file under keys of its own (``extras`` of
:func:`state_document`): ``ost_rates``, the per-OST speed estimates
(:mod:`lustre_alloc.mapper.speed.rate_memory`). Readers ignore keys they do not know, so a file from
either side of that addition loads.

:func:`load_predictor` raises :class:`PredictorStateError` for a missing, unreadable,
corrupt, wrong-format, wrong-version or incompatible file; :func:`load_or_new` logs that
error and returns a fresh predictor instead, which is what the mapper service does at start.
"""
from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from lustre_alloc.mapper.predictor.markov import (MarkovConfig, MarkovPredictor, PredictorConfigError,
                           PredictorStateError, PredictorUsageError)

log = logging.getLogger("lustre_alloc.mapper.predictor.markov_store")

FORMAT = "lustre-alloc-markov-predictor"
"""Value of the ``format`` key: what kind of file this is."""
VERSION = 1
"""Version of the layout above; bump on any incompatible change."""


def state_document(predictor: MarkovPredictor,
                   extras: dict[str, Any] | None = None) -> dict[str, Any]:
    """The state file's document: a copy of the learned state (plain lists), so it can be
    written from another thread while the predictor keeps learning. ``extras``: other
    learned state saved in the same file under its own keys (the OST rate memory,
    :mod:`lustre_alloc.mapper.speed.rate_memory`); it may not replace the predictor's keys.

    Raises:
        ValueError: an extra key is one of the predictor's.
    """
    doc = {"format": FORMAT, "version": VERSION, "config": predictor.config.as_dict(),
           "apps": predictor.export_apps()}
    return with_extras(doc, extras)


def with_extras(doc: dict[str, Any], extras: dict[str, Any] | None) -> dict[str, Any]:
    """``doc`` with ``extras``' keys added (see :func:`state_document`).

    Raises:
        ValueError: an extra key is already in ``doc``.
    """
    for key, value in (extras or {}).items():
        if key in doc:
            raise ValueError(f"state document: extra key {key!r} is the predictor's")
        doc[key] = value
    return doc


def write_document(doc: dict[str, Any], path: str | Path) -> Path:
    """Write a :func:`state_document` to ``path`` atomically and durably: a temporary file
    ``<name>.<random>.tmp`` in the same directory, fsync, rename, fsync of the directory (so
    the rename itself survives a crash). Returns the path.

    ``json.dump`` to the file encodes in chunks, so a writer thread lets the request loop
    run between chunks (``json.dumps`` would hold the GIL for the whole document).

    Raises:
        OSError: the directory is not writable (the previous file, if any, is untouched).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, separators=(",", ":"), allow_nan=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def remove_stale_temporaries(path: str | Path) -> list[Path]:
    """Delete temporaries a crashed save left beside ``path`` (``<name>.*.tmp`` and the
    service's ``.<name>.*.tmp``); returns what was removed."""
    path = Path(path)
    removed = []
    for pattern in (f"{path.name}.*.tmp", f".{path.name}.*.tmp"):
        for tmp in path.parent.glob(pattern):
            try:
                tmp.unlink()
                removed.append(tmp)
            except OSError:
                continue
    if removed:
        log.warning("removed %d stale temporary files of %s", len(removed), path,
                    extra={"event": "markov_stale_tmp_removed", "path": str(path),
                           "count": len(removed)})
    return removed


def save_predictor(predictor: MarkovPredictor, path: str | Path,
                   extras: dict[str, Any] | None = None) -> Path:
    """Write ``predictor``'s learned state (and ``extras``, :func:`state_document`) to
    ``path`` atomically; returns the path.

    Raises:
        OSError: the directory is not writable (the previous file, if any, is untouched).
    """
    path = write_document(state_document(predictor, extras), path)
    log.info("saved %d applications to %s", len(predictor), path,
             extra={"event": "markov_saved", "path": str(path), "apps": len(predictor),
                    "version": VERSION})
    return path


def load_predictor(path: str | Path, config: MarkovConfig | None = None, *,
                   strict: bool = False) -> MarkovPredictor:
    """Read a state file written by :func:`save_predictor`.

    Application records are loaded one by one: a malformed one is skipped, logged with its
    position and reason, and counted in ``stats.skipped_on_load`` (``strict``: raise instead),
    so one bad record never discards every application.

    Args:
        path: the file.
        config: the configuration to run with; None = the one stored in the file. Its
            ``order`` and candidate training lengths must match the file's (the learned
            transitions depend on them); ``history`` may be smaller (older requests are
            dropped) and ``max_apps``/``mse_decay`` may differ freely.
    Raises:
        PredictorStateError: the file is missing or unreadable, not JSON, not a predictor
            state file, of another version, or inconsistent (the message says where).
    """
    path = Path(path)
    return predictor_from_document(path, read_state_document(path), config, strict=strict)


def read_state_document(path: str | Path) -> dict[str, Any]:
    """The document of a state file written by :func:`save_predictor`, its format and
    version checked (the rest is read by :func:`predictor_from_document` and the extras'
    owners).

    Raises:
        PredictorStateError: the file is missing or unreadable, not JSON, not a predictor
            state file, or of another version.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PredictorStateError(path, "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PredictorStateError(path, f"unreadable: {exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PredictorStateError(path, f"corrupt: not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise PredictorStateError(path, f"not a Markov predictor state file (format {FORMAT!r})")
    version = doc.get("version")
    if version != VERSION:
        raise PredictorStateError(path, f"version {version!r}, this build reads version {VERSION}")
    return doc


def predictor_from_document(path: str | Path, doc: dict[str, Any],
                            config: MarkovConfig | None = None, *,
                            strict: bool = False) -> MarkovPredictor:
    """The predictor of a :func:`read_state_document` document read from ``path``
    (:func:`load_predictor` for the arguments and what is skipped).

    Raises:
        PredictorStateError: the configuration or the records are inconsistent.
    """
    path = Path(path)
    stored = _stored_config(path, doc.get("config"))
    if config is None:
        config = stored
    elif (config.order, config.lengths) != (stored.order, stored.lengths):
        raise PredictorStateError(
            path, f"learned with order {stored.order} and training lengths {list(stored.lengths)}, "
                  f"configured order {config.order} and {list(config.lengths)}")
    apps = doc.get("apps")
    if not isinstance(apps, list):
        raise PredictorStateError(path, "apps: not a list")
    predictor = MarkovPredictor(config)
    skipped = 0
    for i, rec in enumerate(apps):
        try:
            if isinstance(rec, dict) and isinstance(rec.get("hist"), list):
                rec = dict(rec, hist=rec["hist"][-config.history:])
            predictor.import_app(rec)
        except PredictorUsageError as exc:
            if strict:
                raise PredictorStateError(path, f"apps[{i}]: {exc}") from None
            skipped += 1
            log.warning("%s: record apps[%d] skipped: %s", path, i, exc,
                        extra={"event": "markov_record_skipped", "path": str(path),
                               "record": f"apps[{i}]", "reason": str(exc)})
    predictor.stats.skipped_on_load = skipped
    return predictor


def _stored_config(path: Path, raw: Any) -> MarkovConfig:
    if not isinstance(raw, dict):
        raise PredictorStateError(path, "config: not an object")
    try:
        raw = dict(raw)
        if isinstance(raw.get("train_lengths"), list):
            raw["train_lengths"] = tuple(raw["train_lengths"])
        return MarkovConfig(**raw)
    except PredictorConfigError as exc:
        raise PredictorStateError(path, f"config: {exc}") from None
    except TypeError as exc:
        raise PredictorStateError(path, f"config: {exc}") from None


def load_or_new(path: str | Path, config: MarkovConfig) -> MarkovPredictor:
    """The predictor the mapper starts with: the saved one, or a fresh one.

    A missing file (first start) gives a fresh predictor and an info line; any other
    :class:`PredictorStateError` is logged as an error (path and reason) and also gives a
    fresh predictor, so a bad state file never stops the mapper.
    """
    log.info("Markov config %s", " ".join(f"{k}={v}" for k, v in config.as_dict().items()),
             extra={"event": "markov_config", **config.as_dict()})
    try:
        predictor = load_predictor(path, config)
    except PredictorStateError as exc:
        if exc.reason == "no such file":
            log.info("no learned state at %s: starting fresh", exc.path,
                     extra={"event": "markov_state_missing", "path": str(exc.path),
                            "action": "start_fresh"})
        else:
            log.error("learned state %s unusable (%s): starting fresh", exc.path, exc.reason,
                      extra={"event": "markov_state_unusable", "path": str(exc.path),
                             "reason": exc.reason, "action": "start_fresh"})
        return MarkovPredictor(config)
    log.info("loaded %d applications from %s", len(predictor), path,
             extra={"event": "markov_loaded", "path": str(path), "apps": len(predictor)})
    return predictor
