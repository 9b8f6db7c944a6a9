"""sklearn_fdp's global settings: set_config, get_config, config_context."""

import threading

import pytest

import sklearn_fdp
from sklearn_fdp import config_context, get_config, set_config


def test_defaults_and_round_trip():
    assert get_config() == {"noise_prefetch": False}  # one thread unless asked
    config = get_config()
    config["noise_prefetch"] = True  # a copy: changing it changes nothing
    assert get_config()["noise_prefetch"] is False
    try:
        set_config(noise_prefetch=True)
        assert get_config()["noise_prefetch"] is True
        set_config()  # None leaves it as it is
        assert get_config()["noise_prefetch"] is True
    finally:
        set_config(noise_prefetch=False)
    assert get_config()["noise_prefetch"] is False


def test_context_restores_on_exit_and_on_error():
    with config_context(noise_prefetch=True):
        assert get_config()["noise_prefetch"] is True
        with config_context(noise_prefetch=False):
            assert get_config()["noise_prefetch"] is False
        assert get_config()["noise_prefetch"] is True
    assert get_config()["noise_prefetch"] is False
    with pytest.raises(RuntimeError, match="boom"):
        with config_context(noise_prefetch=True):
            raise RuntimeError("boom")
    assert get_config()["noise_prefetch"] is False


@pytest.mark.parametrize("value", [1, "yes", None.__class__])
def test_bad_values_are_refused_with_the_value_named(value):
    with pytest.raises(TypeError, match=r"noise_prefetch must be True or False, got"):
        set_config(noise_prefetch=value)
    with pytest.raises(TypeError, match=r"noise_prefetch must be True or False"):
        with config_context(noise_prefetch=value):
            pass
    assert get_config()["noise_prefetch"] is False


def test_context_is_local_to_its_thread():
    seen = []
    with config_context(noise_prefetch=True):
        worker = threading.Thread(target=lambda: seen.append(get_config()["noise_prefetch"]))
        worker.start()
        worker.join()
    assert seen == [False]


def test_exported_from_the_package():
    for name in ("set_config", "get_config", "config_context"):
        assert name in sklearn_fdp.__all__
        assert getattr(sklearn_fdp, name).__module__ == "sklearn_fdp._config"
