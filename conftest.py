"""Collection rules for the doctests of the package (``--doctest-modules``).

``MLPFeatureDP``'s docstring example needs the optional ``torch`` extra: without
it the module's doctests are not collected (its tests in ``tests/neural`` skip
themselves the same way).
"""

import importlib.util

collect_ignore = []
if importlib.util.find_spec("torch") is None:
    collect_ignore += ["sklearn_fdp/neural/_mlp.py", "sklearn_fdp/neural/_mlp_classifier.py",
                       "sklearn_fdp/neural/_mlp_regressor.py"]
