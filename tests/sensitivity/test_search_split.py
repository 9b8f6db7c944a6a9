"""The search's training/validation split keeps add/remove neighbours (issue 30 item 5).

Each trial of :class:`~sklearn_fdp.model_selection.PrivateRandomizedSearchCV`
is accounted under add/remove: its fit's event and its score's Gaussian are
the add/remove ones. That holds only if adding one record to the search's
data adds it to exactly one side of the split and moves no other record:
then the trial's training set (and its validation set) is an add/remove
neighbour of the one it had, or the same set. The fixed-size split before
issue 30 (a permutation, ``round(0.2 n)`` rows held out) broke this for
every ``n``: the permutation of ``n + 1`` rows is another permutation, and
for a fifth of all ``n`` the training size did not even change (adding a
record replaced one in the training set). Here the search runs on ``D`` and
``D + {x}`` (same ``random_state``, as the attacker's neighbouring pair
fixes every known random choice) for ten consecutive ``n``, every ``n mod 5``
twice, and the rows each trial was fitted and scored on are read back by
their id column.
"""

import numpy as np
import pytest
from sklearn.base import clone

from sklearn_fdp import DPSGDClassifier
from sklearn_fdp import _search
from sklearn_fdp.model_selection import PrivateRandomizedSearchCV


class _SeenDPSGD(DPSGDClassifier):
    """Records the ids (column 0) of the rows each fit trains on."""

    seen = []

    def fit(self, X, y):
        type(self).seen.append(frozenset(np.asarray(X)[:, 0].round().astype(int)))
        return super().fit(X, y)


def _sides(X, y, monkeypatch, random_state):
    """Ids of the (training, validation) rows of the search's one trial."""
    scored = []
    real = _search._correct_count
    monkeypatch.setattr(_search, "_correct_count", lambda est, X_val, y_val: scored.append(
        frozenset(np.asarray(X_val)[:, 0].round().astype(int))) or real(est, X_val, y_val))
    _SeenDPSGD.seen = []
    est = _SeenDPSGD(epochs=1, batch_size=2, epsilon=None, noise_multiplier=5.0,
                     accountant="rdp")
    PrivateRandomizedSearchCV(clone(est), {"learning_rate": [0.1]}, delta=1e-5, n_iter=1,
                              random_state=random_state).fit(X, y)
    (train,), (val,) = _SeenDPSGD.seen, scored
    return train, val


def _data(n, rng):
    X = np.c_[np.arange(n, dtype=float), rng.uniform(-1, 1, (n, 2))]
    y = np.arange(n) % 2
    return X, y


@pytest.mark.parametrize("n", range(40, 50))  # every n mod 5, twice
@pytest.mark.parametrize("random_state", [0, 1])
def test_adding_a_record_adds_it_to_exactly_one_side(n, random_state, monkeypatch):
    rng = np.random.default_rng(n)
    X, y = _data(n + 1, rng)
    small = _sides(X[:n], y[:n], monkeypatch, random_state)  # D
    large = _sides(X, y, monkeypatch, random_state)  # D + the record with id n
    assert small[0] | small[1] == set(range(n)) and not small[0] & small[1]
    added = [side for side, (a, b) in enumerate(zip(small, large)) if a != b]
    assert len(added) == 1, (n, small, large)
    side = added[0]
    assert large[side] == small[side] | {n}  # added, nothing else moved
    assert large[1 - side] == small[1 - side]


def test_each_record_is_held_out_with_the_validation_fraction():
    """The coins: a row is held out with probability ``validation_fraction``,
    independently of the others (binomial counts; 4-sigma bound at a fixed seed)."""
    n, trials, fraction = 50, 400, 0.2
    held = np.zeros(n)
    for seed in range(trials):
        _, val = _search._split(n, fraction, np.random.SeedSequence(seed))
        held[val] += 1
    sd = np.sqrt(trials * fraction * (1 - fraction))
    assert np.all(np.abs(held - trials * fraction) < 4.5 * sd)
    total_sd = np.sqrt(n * trials * fraction * (1 - fraction))
    assert abs(held.sum() - n * trials * fraction) < 4 * total_sd
