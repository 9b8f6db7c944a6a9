"""Sphinx configuration of the sklearn_fdp documentation site.

Build: ``make docs`` (or ``sphinx-build -W --keep-going -n -b html docs build/docs/html``
after ``pip install ".[docs]"``). docs/contributing.md, "Building the docs", says why
Sphinx and how the pages are put together.

The Markdown pages of docs/ are read by myst-parser as they are (they stay readable on a
code host); the API reference is generated from the docstrings (numpydoc format) by
autosummary, and its list of names comes from the ``__all__`` of each public module
(:func:`_write_api_reference` below writes ``api_reference.rst``), so it cannot drift
from the code. The scripts in examples/ become gallery pages (sphinx-gallery).
"""

import importlib
import inspect
import pathlib
import re
import sys

import sklearn_fdp

DOCS = pathlib.Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS))  # _sphinx_fdp, named in sphinx_gallery_conf

project = "sklearn_fdp"
author = "sklearn_fdp developers"
copyright = "sklearn_fdp developers"  # noqa: A001 (Sphinx's name)
release = version = sklearn_fdp.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = [
    "_build",
    "**/*.ipynb",
    "sg_execution_times.rst",
    # auto_examples/*.md would be copies: sphinx-gallery writes .rst, and the
    # walkthrough docs/examples/adult_pipeline.md is a page of its own.
]

# -- Markdown (myst-parser) -----------------------------------------------------------
# Heading anchors, so that links such as ``user_guide.md#11-secure-noise`` resolve.
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath", "colon_fence"]
# Links to files that are not pages (benchmarks/results/*.json, the schema example)
# become downloads; a link to a missing file fails the build (and tests/test_docs_links.py).

# -- API reference (autodoc, autosummary, numpydoc) -----------------------------------
autosummary_generate = True
autosummary_generate_overwrite = True
# Members are asked for by the class template (docs/_templates/sklearn_fdp_object.rst),
# inherited ones included (``fit`` of an estimator is often its base class's);
# _skip_foreign_member drops the methods scikit-learn gives every estimator. A module's
# section is its docstring only.
autodoc_default_options = {"member-order": "bysource"}
# The numpydoc docstrings give every type in words ("array-like of shape (n_samples,
# n_features)"); the annotations of the public API (issue 21) are for type checkers,
# and some name types imported only under TYPE_CHECKING, which autodoc cannot resolve.
autodoc_typehints = "none"
numpydoc_show_class_members = False  # the class template lists the members itself
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False

# Cross-references: every reference to an object of sklearn_fdp must resolve (``-n``).
# References into third-party packages cannot: intersphinx would download their
# inventories, and the CI machine reaches package registries only. They are rendered
# as code without a link; these patterns name the packages, nothing of sklearn_fdp.
nitpicky = True
_THIRD_PARTY = (
    r"(sklearn|numpy|np|scipy|pandas|pd|dp_accounting|torch|matplotlib|dask|distributed"
    r"|joblib|skops|tqdm)(\..*)?"
)
# (Without this, 45 references warn: scikit-learn's Pipeline, ColumnTransformer, Bunch,
# scalers ..., pandas.DataFrame, numpy.ndarray, matplotlib's Axes methods, dp-accounting's
# events, skops.io.)
nitpick_ignore_regex = [("py:.*", _THIRD_PARTY)]

# -- Gallery (sphinx-gallery) ---------------------------------------------------------
# Only the quick examples are executed while building (the CI job must stay short); the
# others are rendered as code, and their page says so (see _note_unexecuted below).
EXECUTED_EXAMPLES = r"adult_demo\.py"
sphinx_gallery_conf = {
    "examples_dirs": [str(ROOT / "examples")],
    "gallery_dirs": ["auto_examples"],
    "filename_pattern": EXECUTED_EXAMPLES,
    "ignore_pattern": r"__init__\.py",
    "reset_argv": "_sphinx_fdp.reset_argv",
    "download_all_examples": False,
    "remove_config_comments": True,
    "show_memory": False,
    "within_subsection_order": "FileNameSortKey",
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "min_reported_time": 10**9,  # timings depend on the machine: not printed
    "image_scrapers": ("matplotlib",),
}


# -- HTML -----------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"sklearn_fdp {release}"
html_static_path = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_sidebars = {"**": ["sidebar-nav-bs"]}
html_show_sourcelink = False


# -- the generated API reference ------------------------------------------------------
# (title, module, sentence). The order of the page; every public module is here, and
# tests/test_docs_links.py checks that none is missing.
API_SECTIONS = [
    ("Estimators and top-level names", "sklearn_fdp",
     "Import these from ``sklearn_fdp``."),
    ("Linear models", "sklearn_fdp.linear", None),
    ("Neural networks", "sklearn_fdp.neural", None),
    ("Preprocessing", "sklearn_fdp.preprocessing", None),
    ("Decomposition", "sklearn_fdp.decomposition", None),
    ("Pipelines", "sklearn_fdp.pipeline", None),
    ("Model selection", "sklearn_fdp.model_selection", None),
    ("Protected and public features", "sklearn_fdp.features", None),
    ("Accounting", "sklearn_fdp.accounting", None),
    ("Audits", "sklearn_fdp.audit", None),
    ("Data sets", "sklearn_fdp.datasets", None),
    ("Plots", "sklearn_fdp.plotting", None),
    ("Warnings and errors", "sklearn_fdp.exceptions", None),
    ("Command line", "sklearn_fdp.cli", None),
]


#: Public names of an object documented under another name (``sklearn_fdp.linear.
#: DPSGDClassifier`` is documented as ``sklearn_fdp.DPSGDClassifier``): a reference to
#: either resolves to its one page (see _resolve_alias).
API_ALIASES = {}


def _public_names(module):
    names = getattr(module, "__all__", None)
    if names is None:  # sklearn_fdp.cli: its entry point only
        names = ["main"]
    return [n for n in names if not n.startswith("__")]


def _constant_doc(modname, name):
    """The docstring of a public constant: the string literal after its assignment.

    autodoc would show the docstring of the constant's type (``tuple``) when the
    module that exports the name is not the one that assigns it, so the assignment is
    looked for in the module and in the modules it imports from.
    """
    from sphinx.pycode import ModuleAnalyzer

    candidates = [modname] + sorted(
        m for m in sys.modules if m.startswith(modname + ".") or
        (modname != "sklearn_fdp" and m.startswith(modname.rsplit(".", 1)[0] + "._"))
    )
    for candidate in candidates:
        try:
            docs = ModuleAnalyzer.for_module(candidate).find_attr_docs()
        except Exception:  # a namespace or compiled module: nothing to read
            continue
        if ("", name) in docs:
            return [line for line in docs[("", name)] if line is not None]
    raise RuntimeError(
        f"{modname}.{name} is public but has no docstring: write a string literal on "
        f"the line after its assignment (as for sklearn_fdp.datasets.ADULT_PROTECTED)."
    )


def _write_api_reference():
    """Write api_reference.rst from the ``__all__`` of every public module.

    A name is documented once, under the first module of API_SECTIONS that exports it
    (the estimators under ``sklearn_fdp``); a later module that re-exports it links
    there. Submodules listed in ``__all__`` are sections of their own. A name that is a
    third-party object (``accounting.DpEvent`` is dp-accounting's class) is listed with
    where it comes from instead of a copy of that package's docstring.
    """
    lines = [
        ".. Generated by docs/conf.py from the __all__ of each module: do not edit.",
        "",
        "API reference",
        "=============",
        "",
        "Every public name of sklearn_fdp, from its docstring. The hand-written overview",
        "is :doc:`api`; the user guide and the pages on pipelines, audits and scaling say",
        "how the pieces fit together.",
        "",
    ]
    documented = {}
    for title, modname, sentence in API_SECTIONS:
        module = importlib.import_module(modname)
        lines += [title, "-" * len(title), "", f".. automodule:: {modname}", ""]
        if sentence:
            lines += [sentence, ""]
        own, reexported, foreign, data = [], [], [], []
        for name in _public_names(module):
            obj = getattr(module, name)
            if inspect.ismodule(obj):
                continue
            key = id(obj) if (inspect.isclass(obj) or inspect.isroutine(obj)) else None
            objmod = getattr(obj, "__module__", "") or ""
            if key is not None and key in documented:
                reexported.append(documented[key])
                API_ALIASES[f"{modname}.{name}"] = documented[key]
            elif key is not None and not objmod.startswith("sklearn_fdp"):
                foreign.append((name, f"{objmod}.{obj.__qualname__}"))
            elif key is None:
                data.append(name)
            else:
                own.append(name)
                if key is not None:
                    documented[key] = f"{modname}.{name}"
        if own:
            lines += [f".. currentmodule:: {modname}", "", ".. autosummary::",
                      "   :toctree: generated/", "   :template: sklearn_fdp_object.rst",
                      "", *(f"   {name}" for name in own), ""]
        for name in data:
            value = getattr(module, name)
            lines += [f".. py:data:: {name}", f"   :module: {modname}",
                      f"   :value: {value!r}", "",
                      *(f"   {line}" for line in _constant_doc(modname, name)), ""]
        for name, where in foreign:
            lines += [f"``{modname}.{name}`` is ``{where}``, re-exported for type",
                      "annotations and ``isinstance`` checks (see dp-accounting's documentation).",
                      ""]
        if reexported:
            refs = ", ".join(f":obj:`~{full}`" for full in reexported)
            lines += [f"Also exported here, documented above: {refs}.", ""]
    (DOCS / "api_reference.rst").write_text("\n".join(lines), encoding="utf-8")


_write_api_reference()
templates_path = ["_templates"]


# -- pages of examples that are not executed ------------------------------------------
def _note_unexecuted(app, docname, source):
    """Say on a gallery page that its example was not run while building the docs."""
    if not docname.startswith("auto_examples/") or docname.endswith("/index"):
        return
    script = docname.split("/", 1)[1] + ".py"
    if re.search(EXECUTED_EXAMPLES, script):
        return
    note = (
        "\n.. note::\n\n"
        "   This example is shown without its output: it takes too long to run while\n"
        "   the documentation is built. Run it with ``python examples/" + script + "``.\n\n"
    )
    text = source[0]
    # After the page title (the first line underlined with '=').
    match = re.search(r"^.+\n=+\n", text, flags=re.MULTILINE)
    at = match.end() if match else 0
    source[0] = text[:at] + note + text[at:]


def _markdown_cell_headings(app, docname, source):
    """Turn the Markdown headings of ``# %% [markdown]`` cells into reST section titles.

    examples/adult_pipeline.py is written in the percent format that Jupyter and
    jupytext read, whose text cells are Markdown; sphinx-gallery reads every text block
    as reST, where ``## Setup`` would be a paragraph. (Code is indented under its
    ``code-block`` directive in the generated page, so only text lines start with #.)
    """
    if not docname.startswith("auto_examples/"):
        return
    source[0] = re.sub(r"^#{2,6} +(.+?) *$",
                       lambda m: f"{m.group(1)}\n{'-' * len(m.group(1))}",
                       source[0], flags=re.MULTILINE)


# -- links from the Markdown pages to files outside docs/ ------------------------------
_OUTSIDE_MD_LINK = re.compile(r"\]\((\.\./[^)\s#]+\.md)(#[^)\s]*)?\)")


def _link_outside_pages(app, docname, source):
    """Make a Markdown page's link to a .md file outside docs/ a download.

    On a code host ``[startup](../benchmarks/results/startup.md)`` opens the file; to
    Sphinx a ``.md`` target is a page, and benchmarks/ is no part of the site. The
    ``path:`` scheme tells myst-parser to copy the file and link to the copy.
    (tests/test_docs_links.py checks that every such file exists.)
    """
    if pathlib.Path(app.env.doc2path(docname)).suffix != ".md":  # a str before Sphinx 8
        return
    source[0] = _OUTSIDE_MD_LINK.sub(lambda m: f"](path:{m.group(1)})", source[0])


# -- members and cross-references -----------------------------------------------------
def _skip_foreign_member(app, what, name, obj, skip, options):
    """Leave out the methods that scikit-learn gives every estimator.

    ``set_fit_request`` and the other metadata-routing requests are generated by
    scikit-learn for each estimator; their docstrings cross-reference scikit-learn's own
    glossary and user guide. Properties (``PrivatePipeline.named_steps``) stay: the
    class docstrings list them among their attributes.
    """
    if skip or what not in ("class", "exception") or isinstance(obj, property):
        return None
    module = getattr(obj, "__module__", None) or ""
    if callable(obj) and not module.startswith("sklearn_fdp"):
        return True
    return None


def _resolve_alias(app, env, node, contnode):
    """Resolve a reference to a public alias to the page of the object it names."""
    if node.get("refdomain") != "py":
        return None
    target = API_ALIASES.get(node.get("reftarget"))
    if target is None:
        return None
    return env.get_domain("py").resolve_xref(
        env, node["refdoc"], app.builder, node["reftype"], target, node, contnode
    )


def setup(app):
    app.connect("source-read", _note_unexecuted)
    app.connect("source-read", _markdown_cell_headings)
    app.connect("source-read", _link_outside_pages)
    app.connect("autodoc-skip-member", _skip_foreign_member)
    app.connect("missing-reference", _resolve_alias)
