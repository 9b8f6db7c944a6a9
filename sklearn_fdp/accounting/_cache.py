"""A small persistent cache of noise calibrations (issue 18).

:func:`sklearn_fdp.accounting.calibrate_noise_multiplier` stores each σ it
calibrates in one JSON file, so that sweeps, repeated scripts and the worker
processes of a search pay a calibration once. The file lives in
``$SKLEARN_FDP_CACHE_DIR``, else ``$XDG_CACHE_HOME/sklearn_fdp``, else
``~/.cache/sklearn_fdp``; ``SKLEARN_FDP_CACHE_DIR=""`` disables it.

An entry is keyed by a hash of every input of the calibration (ε, δ, q, T,
accountant, neighbouring relation, the repr of the other events, tol) plus
the dp-accounting version and the version tag of the calibration rule, so a
change of either misses. Writes go to a temporary file in the same directory
that replaces the old one atomically (``os.replace``): concurrent workers never
see a partial file (the last writer wins; an entry another worker wrote in
between may be dropped, which only costs a recalibration). Nothing here ever
raises: an unreadable, corrupt or unwritable file is a miss, logged at debug
level. The cache is not trusted: the caller uses a σ it reads only if it
reproduces the requested ε from above (never more: privacy) and from below
(within the calibration's tolerance: a larger σ, e.g. a stale or corrupted
entry, would cost accuracy silently); otherwise it recalibrates and
replaces the entry (issue 30).
"""

import hashlib
import json
import logging
import math
import os
import tempfile
from pathlib import Path

_LOG = logging.getLogger(__name__)
_FILE = "calibrations.json"
_FORMAT = 1
_MAX_ENTRIES = 4096


def cache_dir():
    """The cache directory, or ``None`` when the cache is disabled."""
    value = os.environ.get("SKLEARN_FDP_CACHE_DIR")
    if value is not None:
        return Path(value).expanduser() if value.strip() else None
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "sklearn_fdp"


def cache_path():
    """The cache file, or ``None`` when the cache is disabled."""
    folder = cache_dir()
    return None if folder is None else folder / _FILE


def key(parts):
    """A stable key for a list of JSON-serialisable inputs (floats by repr)."""
    text = json.dumps(list(parts), separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read(path):
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:  # unreadable or corrupt: a miss
        _LOG.debug("sklearn_fdp calibration cache %s unreadable: %r", path, exc)
        return {}
    if (not isinstance(data, dict) or data.get("format") != _FORMAT
            or not isinstance(data.get("entries"), dict)):
        _LOG.debug("sklearn_fdp calibration cache %s has an unknown layout", path)
        return {}
    return data["entries"]


def get(entry_key):
    """The σ stored under ``entry_key``, or ``None``."""
    path = cache_path()
    if path is None:
        return None
    value = _read(path).get(entry_key)
    if isinstance(value, float) and math.isfinite(value) and value > 0:
        return value
    return None


def put(entry_key, sigma):
    """Store ``sigma`` under ``entry_key``; silently does nothing on failure."""
    path = cache_path()
    if path is None:
        return
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        entries = _read(path)
        entries.pop(entry_key, None)
        entries[entry_key] = float(sigma)
        while len(entries) > _MAX_ENTRIES:  # oldest first (insertion order)
            del entries[next(iter(entries))]
        fd, tmp = tempfile.mkstemp(prefix=".calibrations-", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"format": _FORMAT, "entries": entries}, fh)
        os.replace(tmp, path)
        tmp = None
    except (OSError, ValueError, TypeError) as exc:
        _LOG.debug("sklearn_fdp calibration cache %s not written: %r", path, exc)
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def clear():
    """Delete the cache file (if any); silently does nothing on failure."""
    path = cache_path()
    if path is None:
        return
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        _LOG.debug("sklearn_fdp calibration cache %s not removed: %r", path, exc)
