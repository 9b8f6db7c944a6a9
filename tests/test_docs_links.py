"""The Markdown docs point only at files of the repository, and their lists of names are whole.

A reader of README.md or docs/ on a code host, or of the docs site built from a clone, has the
repository and nothing else: a link to ``../shared/papers/...`` (a folder of the developers'
machines) or to a file that was renamed is a dead end. Links to the web (http, https, mailto)
are not followed here. Fast: no Sphinx, no network.
"""

import ast
import importlib
import pathlib
import pkgutil
import re
import subprocess
from urllib.parse import unquote

import pytest

import sklearn_fdp

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").rglob("*.md")])
PAGES = [p for p in PAGES if "_build" not in p.parts and p.exists()]

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_INLINE_LINK = re.compile(r"\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)
_HTML_LINK = re.compile(r"""(?:href|src)\s*=\s*["']([^"']+)["']""")
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")
_WEB = {"http", "https", "mailto"}


def _tracked_files():
    """The files git tracks (and their folders), or None outside a git checkout."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True, timeout=60).stdout.decode()
    except (OSError, subprocess.SubprocessError):
        return None
    tracked = set()
    for name in filter(None, out.split("\0")):
        path = ROOT / name
        tracked.add(path)
        tracked.update(path.parents)
    return tracked


TRACKED = _tracked_files()


def _links(text):
    """Link targets of a Markdown text, outside code blocks and code spans."""
    kept, fence = [], None
    for line in text.splitlines():
        opening = _FENCE.match(line)
        if fence is None and opening:
            fence = opening.group(1)
        elif fence is not None:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
        else:
            kept.append(line)
    text = "\n".join(kept)
    spans = [m.group(2) for m in _CODE_SPAN.finditer(text)]
    text = _CODE_SPAN.sub("", text)
    targets = [m.group(1) for m in _INLINE_LINK.finditer(text)]
    targets += [m.group(1) for m in _REFERENCE_DEF.finditer(text)]
    targets += [m.group(1) for m in _HTML_LINK.finditer(text)]
    return targets, spans


def _problem(page, target, base):
    """Why ``target`` (relative to ``base``) is not a file of the repository, or None."""
    path = (base / unquote(target)).resolve()
    if not path.is_relative_to(ROOT):
        return f"{target!r} points outside the repository"
    if not path.exists():
        return f"{target!r} does not exist ({path.relative_to(ROOT)})"
    if TRACKED is not None and path not in TRACKED:
        return f"{target!r} is not tracked by git (not in a user's clone)"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve_to_repository_files(page):
    targets, _ = _links(page.read_text(encoding="utf-8"))
    problems = []
    for target in targets:
        scheme = _SCHEME.match(target)
        if scheme:
            if scheme.group(1).lower() not in _WEB:
                problems.append(f"{target!r}: only http(s) and mailto links may leave the repo")
            continue
        path = target.split("#", 1)[0].split("?", 1)[0]
        if not path:  # an anchor on the same page
            continue
        problem = _problem(page, path, page.parent)
        if problem:
            problems.append(problem)
    assert not problems, f"{page.relative_to(ROOT)}: " + "; ".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_paths_named_in_code_exist(page):
    """A Markdown file named in code (```docs/cli.md```) is one a reader can open.

    Relative to the page or to the repository root; this is what caught the user guide's
    ``../shared/papers/`` and the threat model's ``papers/...md``.
    """
    _, spans = _links(page.read_text(encoding="utf-8"))
    problems = []
    for span in spans:
        span = span.strip()
        if not re.fullmatch(r"[\w.-]*/[\w./-]*\.md", span) and not span.startswith("../"):
            continue
        if any(_problem(page, span, base) is None for base in (page.parent, ROOT)):
            continue
        problems.append(_problem(page, span, page.parent))
    assert not problems, f"{page.relative_to(ROOT)}: " + "; ".join(problems)


def test_the_checker_finds_bad_links(tmp_path):
    text = ("[ok](docs/index.md) [paper](../shared/papers/x.md) ![f](docs/figures/nope.png)\n"
            "```\n[in a code block](missing.md)\n```\n[web](https://arxiv.org/abs/2307.11106)\n"
            "[ref]: ./docs/cli.md\n`../shared/papers/`\n")
    targets, spans = _links(text)
    assert targets == ["docs/index.md", "../shared/papers/x.md", "docs/figures/nope.png",
                       "https://arxiv.org/abs/2307.11106", "./docs/cli.md"]
    assert spans == ["../shared/papers/"]
    page = ROOT / "README.md"
    assert _problem(page, "docs/index.md", ROOT) is None
    assert "outside the repository" in _problem(page, "../shared/papers/x.md", ROOT)
    assert "does not exist" in _problem(page, "docs/figures/nope.png", ROOT)


def _api_sections():
    """``API_SECTIONS`` of docs/conf.py, read without running conf.py (it writes files)."""
    tree = ast.parse((ROOT / "docs" / "conf.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                getattr(t, "id", None) == "API_SECTIONS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("docs/conf.py defines no API_SECTIONS")


PUBLIC_MODULES = ["sklearn_fdp"] + [
    f"sklearn_fdp.{m.name}" for m in pkgutil.iter_modules(sklearn_fdp.__path__)
    if not m.name.startswith("_")
]


def test_api_reference_has_a_section_per_public_module():
    """Every public module is a section of the generated API reference (docs/conf.py)."""
    assert sorted(module for _, module, _ in _api_sections()) == sorted(PUBLIC_MODULES)


def test_api_overview_names_every_public_name():
    """docs/api.md, the hand-written overview, mentions every name of every ``__all__``."""
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    missing = [
        f"{module}.{name}"
        for module in PUBLIC_MODULES
        for name in getattr(importlib.import_module(module), "__all__", [])
        if not name.startswith("__") and not re.search(rf"\b{re.escape(name)}\b", text)
    ]
    assert not missing, f"docs/api.md does not mention {missing}"


def test_every_page_is_in_the_site_toctree():
    # A page missing from index.md's toctree fails the docs build (-W) only in
    # CI's docs job; catch it in the test suite too.
    import re

    docs = ROOT / "docs"
    index = (docs / "index.md").read_text(encoding="utf-8")
    block = re.search(r"```\{toctree\}\n(.*?)```", index, re.S).group(1)
    listed = {line.strip() for line in block.splitlines()
              if line.strip() and not line.startswith(":")}
    pages = {str(p.relative_to(docs).with_suffix("")) for p in docs.rglob("*.md")
             if p.name != "index.md" and not {"_build", "generated", "auto_examples"} & set(p.parts)}
    missing = sorted(pages - listed)
    assert not missing, f"docs pages not in docs/index.md's toctree: {missing}"
