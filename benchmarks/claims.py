"""Check that every benchmark figure the README and docs quote is what the benchmark stored.

A rerun of a benchmark rewrites ``benchmarks/results/*.json`` (and its Markdown
table); a number copied into the docs by hand would silently go stale. This
script reads every Markdown page (``README.md``, ``docs/**/*.md``) section by
section and checks each *figure* in it against the results of the benchmarks
that section names.

What counts as a figure: a decimal number with at least three decimals
(``0.8440``, ``0.825``), a number written with ``±`` and its half-width
(``+2.44 ± 0.80``), and a ratio (``3.4×``). Integers, ε/δ grid values
(``0.03``, ``1e-5``), other two-decimal numbers, arXiv ids and targets
written with an inequality (``≤ 1.3×``) are not figures.

Where a section's figures come from:

* a heading that names a benchmark script (``## Speed (`benchmarks/bench_speed.py`)``)
  attributes its whole section (down to the next heading of the same or a
  higher level) to that script's result files: the ``*.json`` / ``*.md``
  names the script writes, read from its source;
* a comment ``<!-- claims: adult.json fdp_adult.json -->`` attributes the
  paragraphs that follow it, to the next heading, to those result files;
* ``<!-- claims: none — REASON -->`` says that the figures that follow are
  not benchmark results (worked examples, analytic bounds, a run no longer
  stored), and why; they are not checked;
* ``<!-- claims: end -->`` returns to the heading's attribution;
* a ``claims`` comment at the end of a line of text applies to that line only.

A figure with ``k`` decimals matches when some number stored in one of its
section's result files rounds to it at ``k`` decimals: a figure of three
decimals or fewer (not a ratio) must be in the benchmark's Markdown table
where it writes one, since its JSON holds so many numbers that one matches
almost any such figure by chance; more precise figures and ratios may match
any float in the JSON too. A figure with no source -- in a
section that neither names a benchmark nor carries a ``claims`` comment -- is
an error too: say where it comes from.

Run ``python benchmarks/claims.py`` (exit status 1 and one line per stale or
unattributed figure); ``tests/test_claims.py`` runs the same check.
"""

from __future__ import annotations

import json
import math
import pathlib
import re
import sys
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
RESULTS = BENCHMARKS / "results"

# A decimal with >= 3 decimals; a decimal followed by ± (and the half-width after
# it); a decimal followed by × or x (a ratio).
_NUMBER = r"\d+\.\d+"
_FIGURE = re.compile(
    rf"(?<![\w.\-/])(?P<value>{_NUMBER})(?=\s*(?:±|×|x\b))"   # before ± or a ratio sign
    rf"|(?<=±)\s*(?P<half>{_NUMBER})"                          # the half-width after ±
    rf"|(?<![\w.\-/])(?P<plain>\d+\.\d{{3,}})(?!\w|\.\d)"      # >= 3 decimals
)
# arXiv ids; targets and bounds written with an inequality ("≤ 1.3×", "≥ 3×").
_IDENTIFIER = re.compile(r"(?:arXiv:?\s*|abs/|pdf/)\d{4}\.\d{4,5}(?:v\d+)?"
                         r"|[≤≥<>]\s*\d+(?:\.\d+)?", re.I)
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_SCRIPT = re.compile(r"benchmarks/((?:studies/)?\w+)\.py")  # studies/: the rule studies
_CLAIMS = re.compile(r"<!--\s*claims:\s*(.*?)\s*-->")
_CODE_FENCE = re.compile(r"^\s*(```|~~~)")
_RESULT_NAME = re.compile(r"\b([\w]+\.(?:json|md))\b")


@dataclass(frozen=True)
class Finding:
    """One figure that does not check."""

    path: str
    line: int
    figure: str
    why: str

    def __str__(self):
        return f"{self.path}:{self.line}: {self.figure}: {self.why}"


def _decimals(text):
    return len(text.split(".", 1)[1]) if "." in text else 0


def _numbers_in_json(obj, out):
    if isinstance(obj, bool):
        return
    if isinstance(obj, (int, float)):
        if math.isfinite(obj):
            out.append(float(obj))
    elif isinstance(obj, dict):
        for v in obj.values():
            _numbers_in_json(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _numbers_in_json(v, out)
    elif isinstance(obj, str):
        out.extend(float(m) for m in re.findall(r"[-+]?\d+\.\d+(?:[eE][-+]?\d+)?", obj))


_SOURCE_CACHE: dict[str, list[float]] = {}


def source_numbers(name):
    """Every number stored in ``benchmarks/results/<name>`` (JSON or Markdown)."""
    if name not in _SOURCE_CACHE:
        path = RESULTS / name
        numbers: list[float] = []
        if path.suffix == ".json":
            _numbers_in_json(json.loads(path.read_text()), numbers)
        else:
            numbers.extend(float(m) for m in re.findall(r"\d+\.\d+", path.read_text()))
        _SOURCE_CACHE[name] = numbers
    return _SOURCE_CACHE[name]


def script_results(script):
    """The result files ``benchmarks/<script>.py`` writes (names found in its source).

    ``script`` may be ``studies/<name>``: a rule study writes to the same
    ``benchmarks/results/`` folder as the benchmarks.
    """
    path = BENCHMARKS / f"{script}.py"
    if not path.exists():
        return None
    names = {m for m in _RESULT_NAME.findall(path.read_text()) if (RESULTS / m).exists()}
    stem = script.rsplit("/", 1)[-1].removeprefix("bench_")
    names.update(p.name for p in RESULTS.glob(f"{stem}*") if p.is_file())
    parts = RESULTS / f"{stem}_parts"
    if parts.is_dir():
        names.update(f"{parts.name}/{p.name}" for p in parts.glob("*.json"))
    return sorted(names)


def _matches(figure, sources, ratio=False):
    value = abs(float(figure))
    tol = 0.5 * 10.0 ** -_decimals(figure) * (1 + 1e-9)
    # A benchmark's Markdown table is what pages quote. Its JSON holds every
    # seed, ε and quantile, so some number there rounds to almost any
    # three-decimal figure by chance: a figure of three decimals or fewer must
    # be in the table where the benchmark writes one; its JSON is searched for
    # more precise figures, ratios, and benchmarks without a table.
    if _decimals(figure) <= 3 and not ratio:
        tables = {n.rsplit(".", 1)[0] for n in sources if n.endswith(".md")}
        sources = [n for n in sources
                   if n.endswith(".md") or n.rsplit(".", 1)[0] not in tables]
    for name in sources:
        for y in source_numbers(name):
            y = abs(y)
            if abs(y - value) <= tol or abs(100 * y - value) <= tol:  # fraction quoted in points
                return True
    return False


def check_page(path):
    """The findings of one Markdown page (``path`` relative to the repository root)."""
    findings = []
    text = (ROOT / path).read_text()
    # Per heading level: the result files its heading attributes (None: none named).
    by_level: dict[int, list[str] | None] = {}
    comment_sources = None   # set by a claims comment, until the next heading
    in_code = False
    for lineno, line in enumerate(text.splitlines(), 1):
        if _CODE_FENCE.match(line):
            in_code = not in_code
            continue
        heading = _HEADING.match(line) if not in_code else None
        if heading:
            level = len(heading.group(1))
            for deeper in [k for k in by_level if k >= level]:
                del by_level[deeper]
            scripts = _SCRIPT.findall(heading.group(2))
            if scripts:
                files = []
                for script in scripts:
                    found = script_results(script)
                    if found is None:
                        findings.append(Finding(path, lineno, heading.group(2),
                                                f"benchmarks/{script}.py does not exist"))
                    else:
                        files.extend(found)
                by_level[level] = files
            comment_sources = None
            continue
        line_sources = None
        claims = _CLAIMS.search(line)
        if claims:
            spec = claims.group(1).split()
            if spec == ["end"]:
                parsed = None
            elif spec[:1] == ["none"]:
                if len(spec) < 2:
                    findings.append(Finding(path, lineno, "claims: none",
                                            "say why: <!-- claims: none — REASON -->"))
                parsed = []
            else:
                missing = [n for n in spec if not (RESULTS / n).exists()]
                for n in missing:
                    findings.append(Finding(path, lineno, n,
                                            "no such file in benchmarks/results/"))
                parsed = [n for n in spec if n not in missing]
            rest = _CLAIMS.sub("", line).strip()
            if not rest:
                comment_sources = parsed  # alone on its line: the lines below
                continue
            line = rest
            line_sources = [] if parsed is None else parsed  # at a line's end: that line
        if in_code and comment_sources is None and line_sources is None:
            continue  # code blocks: doctest values and printed examples, not quotes
        line = _IDENTIFIER.sub("", line)  # arXiv ids and targets are not figures
        figures = [(m.group("value") or m.group("half") or m.group("plain"),
                    bool(re.match(r"\s*(?:×|x\b)", line[m.end():])))
                   for m in _FIGURE.finditer(line)]
        if not figures:
            continue
        if line_sources is not None:
            sources = line_sources
        elif comment_sources is not None:
            sources = comment_sources
        else:
            named = [v for v in by_level.values() if v is not None]
            sources = named[-1] if named else None
        if sources is None:
            for figure, _ in figures:
                findings.append(Finding(
                    path, lineno, figure,
                    "no source: name the benchmark in the heading, or put "
                    "<!-- claims: FILE.json ... --> (or <!-- claims: none — REASON --> for "
                    "figures that are not benchmark results) above it"))
            continue
        if not sources:
            continue  # claims: none
        for figure, ratio in figures:
            if not _matches(figure, sources, ratio):
                findings.append(Finding(
                    path, lineno, figure,
                    f"not in {', '.join(sources)} (stale? rerun, or correct the page)"))
    return findings


def pages():
    """README.md and every Markdown page under docs/."""
    return ["README.md"] + sorted(str(p.relative_to(ROOT))
                                  for p in (ROOT / "docs").rglob("*.md")
                                  if "_build" not in p.parts)


def check_all():
    """Every finding of every page."""
    return [f for page in pages() for f in check_page(page)]


def main():
    findings = check_all()
    for finding in findings:
        print(finding)
    n = sum(len(re.findall(_FIGURE, (ROOT / p).read_text())) for p in pages())
    print(f"{len(findings)} of about {n} figures do not check", file=sys.stderr)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
