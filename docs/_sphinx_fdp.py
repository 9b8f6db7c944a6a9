"""Helpers of docs/conf.py that Sphinx must be able to import by name.

sphinx-gallery caches its configuration between builds, so the callables it is given
are named here ("_sphinx_fdp.reset_argv") rather than passed as functions.
"""

import os
import tempfile

#: Where the executed examples write their figures (the gallery takes the figures from
#: matplotlib; nothing is written into the source tree).
FIGURE_DIR = os.path.join(tempfile.gettempdir(), "sklearn_fdp_docs_figures")


def reset_argv(gallery_conf, script_vars):
    """Command line of an executed example: the demo's smallest path (``--quick``)."""
    if os.path.basename(script_vars["src_file"]) == "adult_demo.py":
        return ["--quick", "--figure", os.path.join(FIGURE_DIR, "adult_demo.png")]
    return []
