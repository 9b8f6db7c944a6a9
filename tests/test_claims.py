"""Every benchmark figure quoted in README.md and docs/ is the one its benchmark stored.

The check itself is ``benchmarks/claims.py`` (run it for the list of findings);
the tests below run it on the real pages and show, on made-up pages, that it
catches a stale figure, an unattributed one and a reason-less exemption.
"""

import importlib.util
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def claims():
    spec = importlib.util.spec_from_file_location("claims", ROOT / "benchmarks" / "claims.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["claims"] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("claims", None)


def test_every_quoted_figure_is_in_its_benchmark_results(claims):
    findings = claims.check_all()
    assert not findings, "\n".join(map(str, findings))


def _page(claims, monkeypatch, tmp_path, text):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(text)
    monkeypatch.setattr(claims, "ROOT", tmp_path)
    return claims.check_page("docs/page.md")


def _stored_accuracy():
    # A figure bench_fdp.py stored: public-only LogisticRegression on Adult.
    import json

    text = json.dumps(json.loads((ROOT / "benchmarks/results/fdp_adult.json").read_text()))
    assert "0.798" in text
    return "0.7980"


def test_a_stale_figure_is_reported(claims, monkeypatch, tmp_path):
    good = _stored_accuracy()
    findings = _page(claims, monkeypatch, tmp_path, (
        "# Results (`benchmarks/bench_fdp.py`)\n\n"
        f"Public-only reaches {good}; DP-SGD 0.7121 ± 0.0333.\n"))
    assert [f.figure for f in findings] == ["0.7121", "0.0333"]
    assert all("fdp_adult.json" in f.why for f in findings)


@pytest.mark.parametrize("text", [
    # A stored figure rounded is not stale.
    "<!-- claims: fdp_adult.json -->\n\nPublic-only reaches 0.798 and 0.7980.\n",
    # arXiv ids and addresses are not figures.
    "# Page\n\nMahloujifar et al., arXiv:2506.19836; https://arxiv.org/abs/2307.11106.\n",
    # Targets written with an inequality are not figures.
    "# Page\n\nTarget: ≤ 1.3× and ≥ 3.25×.\n",
], ids=["rounded_stored_figure", "arxiv_ids", "targets_with_an_inequality"])
def test_what_is_not_reported(claims, monkeypatch, tmp_path, text):
    assert _page(claims, monkeypatch, tmp_path, text) == []


def test_a_figure_without_a_source_is_reported(claims, monkeypatch, tmp_path):
    findings = _page(claims, monkeypatch, tmp_path, "# Page\n\nAccuracy 0.8123, 2.5× faster.\n")
    assert [f.figure for f in findings] == ["0.8123", "2.5"]
    assert all("no source" in f.why for f in findings)


def test_exemptions_need_a_reason_and_end_at_the_next_heading(claims, monkeypatch, tmp_path):
    findings = _page(claims, monkeypatch, tmp_path, (
        "# A\n\n<!-- claims: none -->\n\nWorked example: 0.1234.\n\n"
        "# B\n\nAnd 0.5678 here. <!-- claims: none — a constant of the rule -->\n"
        "But 0.9999 here.\n"))
    assert [(f.line, f.figure) for f in findings] == [(3, "claims: none"), (10, "0.9999")]


def test_a_claims_comment_naming_a_missing_file_is_reported(claims, monkeypatch, tmp_path):
    findings = _page(claims, monkeypatch, tmp_path, "<!-- claims: nosuch.json -->\n")
    assert [f.figure for f in findings] == ["nosuch.json"]


def test_a_three_decimal_figure_must_be_in_the_table(claims, monkeypatch, tmp_path):
    # The JSON of a benchmark holds so many numbers that one rounds to almost any
    # three-decimal figure: such a figure counts only when the Markdown table has it.
    table = [t for name in claims.script_results("bench_adamix") if name.endswith(".md")
             for t in claims.source_numbers(name)]
    only_json = next(f"{y:.3f}" for y in claims.source_numbers("adamix.json")
                     if 0 < y < 1 and all(abs(t - round(y, 3)) > 0.0005
                                          and abs(100 * t - round(y, 3)) > 0.0005
                                          for t in table))
    findings = _page(claims, monkeypatch, tmp_path, (
        f"# AdaMix (`benchmarks/bench_adamix.py`)\n\nAccuracy {only_json}.\n"))
    assert [f.figure for f in findings] == [only_json]
