"""Helpers that several test modules share: a fresh interpreter, small unit-norm data."""

import subprocess
import sys

import numpy as np


def run_python(code):
    """The stdout of ``python -c code`` in a fresh interpreter (a non-zero exit fails)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout


def call_without(package, imports, call):
    """Run ``imports`` then ``call`` in a fresh interpreter where ``package`` cannot be
    imported; the stdout has ``ERR <message>`` when the call raised ImportError, and
    ``LOADED False`` when the package stayed out of ``sys.modules``."""
    return run_python(
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name == {package!r} or name.startswith({package + '.'!r}):\n"
        f"            raise ImportError('no {package} here')\n"
        "sys.meta_path.insert(0, Block())\n"
        f"{imports}\n"
        "try:\n"
        f"    {call}\n"
        "except ImportError as e:\n"
        "    print('ERR', e)\n"
        f"print('LOADED', {package!r} in sys.modules)\n")


def run_doc_blocks(page, min_blocks):
    """Run the ```python blocks of ``docs/<page>`` in order, in one namespace (a reader
    following the page); there must be at least ``min_blocks``. Returns the namespace."""
    import pathlib
    import re

    doc = pathlib.Path(__file__).resolve().parents[1] / "docs" / page
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= min_blocks, (page, len(blocks))
    namespace = {}
    for block in blocks:
        exec(compile(block, str(doc), "exec"), namespace)  # noqa: S102 - our own docs
    return namespace


def unit_rows(n, d, *, seed=0, label_noise=0.3):
    """``n`` rows of ``d`` standard normals scaled to unit L2 norm, and the binary label
    ``x_0 + label_noise · N(0, 1) > 0`` (no draw for the noise when it is 0)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    noise = label_noise * rng.normal(size=n) if label_noise else 0.0
    return X, (X[:, 0] + noise > 0).astype(int)
