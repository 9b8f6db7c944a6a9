"""Every transcript of docs/cli.md is what the command line prints today (issue 31).

A transcript is a ``console`` block whose ``$ sklearn-fdp ...`` commands are
followed by their output; commands without output lines (the synopsis) are not
run. The files the worked example names are written from the bundled Adult
data as its Python block says (plus the broken variants the "Errors" section
reads). Compared line by line, stderr first then stdout (as a terminal shows a
command that prints its phases before its summary), with three things
normalised: the seconds of a phase line (``[   2.6 s]``; a transcript that shows
no phase line, as those of the errors, leaves them out), tqdm's progress bar
(its rate varies) and the last digits of a JSON float (another BLAS kernel moves
a log loss in its 15th digit: floats must agree to 1e-9 relative).
"""

import json
import math
import re
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("skops")
pytest.importorskip("tqdm")

from sklearn_fdp.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "cli.md"
_PHASE = re.compile(r"^\[\s*[\d.]+ s\] ")
_BAR = re.compile(r"\d+/\d+ \[")


def transcripts(text):
    """``[(argv, expected_lines)]`` of every command with output, in order;
    ``echo $?`` appears as ``["echo $?"]``."""
    out = []
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            if not line.startswith("$ "):
                i += 1
                continue
            command = line[2:]
            while command.rstrip().endswith("\\"):
                i += 1
                command = command.rstrip()[:-1] + " " + lines[i].strip()
            i += 1
            expected = []
            while i < len(lines) and not lines[i].startswith("$ "):
                expected.append(lines[i])
                i += 1
            while expected and not expected[-1].strip():
                expected.pop()
            command = command.split("  #")[0].strip()
            if expected and (command.startswith("sklearn-fdp ") or command == "echo $?"):
                out.append((command, expected))
    return out


def _normalise(lines):
    kept = []
    for line in lines:
        if _BAR.search(line) or not line.strip():  # the bar, and the line it leaves
            continue
        kept.append(_PHASE.sub("[s] ", line.rstrip()))
    return kept


def _same_json(expected, got):
    if isinstance(expected, float) or isinstance(got, float):
        return math.isclose(float(expected), float(got), rel_tol=1e-9)
    if isinstance(expected, dict):
        return expected.keys() == got.keys() and all(_same_json(expected[k], got[k])
                                                       for k in expected)
    if isinstance(expected, list):
        return len(expected) == len(got) and all(map(_same_json, expected, got))
    return expected == got


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    from sklearn_fdp.datasets import load_adult

    tmp = tmp_path_factory.mktemp("cli_doc")
    b = load_adult()
    b.frame.to_csv(tmp / "adult_train.csv", index=False)
    pd.concat([b.data_test, b.target_test], axis=1).to_csv(tmp / "adult_test.csv", index=False)
    b.frame.to_csv(tmp / "adult_train_semicolon.csv", index=False, sep=";")
    stray = b.frame.astype({"hours-per-week": object})
    stray.loc[41, "hours-per-week"] = "40h"  # data row 42, line 43 of the file
    stray.to_csv(tmp / "adult_train_stray.csv", index=False)
    text = pd.concat([b.data_test, b.target_test], axis=1)
    text["income"] = np.where(text["income"] == 1, ">50K", "<=50K")
    text.to_csv(tmp / "adult_test_text.csv", index=False)
    (tmp / "docs" / "examples").mkdir(parents=True)
    (tmp / "docs" / "examples" / "adult_schema.json").write_bytes(
        (ROOT / "docs" / "examples" / "adult_schema.json").read_bytes())
    return tmp


def test_the_doc_has_transcripts():
    found = transcripts(DOC.read_text(encoding="utf-8"))
    commands = [c for c, _ in found]
    assert any(c.startswith("sklearn-fdp train adult_train.csv") for c in commands)
    assert any(c.startswith("sklearn-fdp evaluate") for c in commands)
    assert any(c.startswith("sklearn-fdp report") for c in commands)
    assert "echo $?" in commands


@pytest.mark.slow
def test_every_transcript_of_docs_cli_md(workdir, capsys, monkeypatch):
    # docs/cli.md's worked example quoted 0.8447 / 0.7550 / 0.3312 where the
    # command printed 0.8456 / 0.7589 / 0.3305, and nothing ran it.
    monkeypatch.chdir(workdir)
    last_rc = None
    stale = []
    for command, expected in transcripts(DOC.read_text(encoding="utf-8")):
        if command == "echo $?":
            if [str(last_rc)] != expected:
                stale.append(f"{command}: {last_rc}")
            continue
        last_rc = main(shlex.split(command)[1:])
        captured = capsys.readouterr()
        got = _normalise(captured.err.splitlines()) + _normalise(captured.out.splitlines())
        want = _normalise(expected)
        if not any(line.startswith("[s] ") for line in want):  # phases left out of the doc
            got = [line for line in got if not line.startswith("[s] ")]
        if want and want[0] == "{":
            if last_rc != 0 or not _same_json(json.loads("\n".join(want)),
                                              json.loads(captured.out)):
                stale.append(f"{command}\n--- now\n{captured.out}{captured.err}")
            continue
        if got != want:
            stale.append(f"{command}\n--- doc\n" + "\n".join(want) + "\n--- now\n"
                         + "\n".join(got))
    assert not stale, "\n\n".join(stale)
