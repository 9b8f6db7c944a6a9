"""Global settings of sklearn_fdp: :func:`set_config`, :func:`get_config`, :func:`config_context`.

Settings that change how a fit runs, never what it computes: a fit gives the
same model bit for bit under every setting. As in scikit-learn, each thread
starts from the global settings and :func:`config_context` changes them for
the current thread only. Worker processes (joblib's loky, dask) start from
the defaults: set the options inside the worker's code, or leave the
defaults.
"""

import threading
from contextlib import contextmanager

_DEFAULTS = {"noise_prefetch": False}
_global_config = dict(_DEFAULTS)
_threadlocal = threading.local()


def _local():
    if not hasattr(_threadlocal, "config"):
        _threadlocal.config = dict(_global_config)
    return _threadlocal.config


def get_config():
    """The current settings of sklearn_fdp (a copy).

    Returns
    -------
    config : dict
        ``{"noise_prefetch": bool}``; see :func:`set_config`.

    See Also
    --------
    set_config : Change the settings.
    config_context : Change them within a ``with`` block.
    """
    return dict(_local())


def _check_bool(name, value):
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}.")


def set_config(noise_prefetch=None):
    """Change sklearn_fdp's settings for the current thread (and the global defaults).

    Parameters
    ----------
    noise_prefetch : bool, default=None
        Draw the Gaussian noise of DP-SGD on a second thread, one step (or a
        block of normals) ahead, while the current step computes its
        gradient. ``False`` (the default) draws it on the calling thread, as
        scikit-learn's ``SGDClassifier`` and Opacus use one thread. The
        draws are the same numbers in the same order either way, so the
        fitted models are bit-identical; prefetching only trades a second
        core's time for wall time on large models (≥ 32,768 parameters
        dense, any CSR fit). ``None`` leaves the setting as it is.

    See Also
    --------
    get_config : The current settings.
    config_context : Change them within a ``with`` block.

    Examples
    --------
    >>> import sklearn_fdp
    >>> sklearn_fdp.set_config(noise_prefetch=True)
    >>> sklearn_fdp.get_config()["noise_prefetch"]
    True
    >>> sklearn_fdp.set_config(noise_prefetch=False)
    """
    local = _local()
    if noise_prefetch is not None:
        _check_bool("noise_prefetch", noise_prefetch)
        local["noise_prefetch"] = noise_prefetch
        _global_config["noise_prefetch"] = noise_prefetch


@contextmanager
def config_context(*, noise_prefetch=None):
    """Change sklearn_fdp's settings within a ``with`` block, in the current thread.

    Parameters
    ----------
    noise_prefetch : bool, default=None
        See :func:`set_config`. ``None`` keeps the current setting.

    Yields
    ------
    None
        The previous settings come back on exit, also on an error.

    See Also
    --------
    set_config : Change the settings for good.

    Examples
    --------
    >>> import sklearn_fdp
    >>> with sklearn_fdp.config_context(noise_prefetch=True):
    ...     sklearn_fdp.get_config()["noise_prefetch"]
    True
    """
    local = _local()
    old = dict(local)
    if noise_prefetch is not None:
        _check_bool("noise_prefetch", noise_prefetch)
        local["noise_prefetch"] = noise_prefetch
    try:
        yield
    finally:
        local.clear()
        local.update(old)
