"""Type aliases of the public API (annotations only: nothing here runs at import).

The estimators' modules use ``from __future__ import annotations`` and import
these names under ``typing.TYPE_CHECKING``, so annotations cost nothing at run
time; type checkers read them through the package's ``py.typed`` marker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    import numpy as np
    import scipy.sparse
    from numpy.typing import ArrayLike

    # Dense or sparse input: what `fit`, `predict` and `transform` accept.
    MatrixLike = Union[ArrayLike, scipy.sparse.spmatrix, scipy.sparse.sparray]
    # `random_state`: a seed, a generator, or None for fresh OS entropy.
    RandomStateLike = Union[int, np.random.Generator, np.random.RandomState, None]
    # `public_features` / `private_features`: column indices, a boolean mask,
    # column names (a name also selects its own one-hot outputs), or a callable
    # applied to each column name.
    FeatureSpec = Union[int, str, Sequence[int], Sequence[bool], Sequence[str],
                        Callable[[str], bool], None]

__all__ = ["ArrayLike", "FeatureSpec", "MatrixLike", "RandomStateLike"]
