#!/usr/bin/env python
"""Start-up time of ``import sklearn_fdp`` and of ``sklearn-fdp --version`` / ``--help``.

Each command runs in a fresh interpreter (``subprocess``), so every import is
paid again ("cold" for the interpreter; the OS file cache is warm after the
first run, which is discarded as a warm-up). Each is run ``--repeats``
times (default 7), interleaved round by round so that a change in the
machine's load hits all alike, and the median wall-clock time is reported
with the minimum and maximum. The command line runs as
``python -m sklearn_fdp`` (what ``tests/test_cli.py`` runs; the
``sklearn-fdp`` console script does the same imports). ``python -c pass``
is the floor: the interpreter's own start-up.

``--compare REF`` also times ``import sklearn_fdp`` and ``--version`` for
the package as of git commit ``REF`` (its ``sklearn_fdp/`` extracted with
``git archive`` into a temporary folder), same rounds.

Writes ``benchmarks/results/startup.json`` and ``startup.md``.

Results (in ``benchmarks/results/``): ``startup.json``, ``startup.md``.
Quoted in (the sections whose figures come from these files):

* docs/cli.md § "Command line: `sklearn-fdp`"
"""

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

from _common import ROOT, library_fingerprint

RESULTS = ROOT / "benchmarks" / "results"

COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "python -c 'import sklearn_fdp'": ["-c", "import sklearn_fdp"],
    "sklearn-fdp --version": ["-m", "sklearn_fdp", "--version"],
    "sklearn-fdp --help": ["-m", "sklearn_fdp", "--help"],
    "python -c 'from sklearn_fdp import FeatureDPLogisticRegression'":
        ["-c", "from sklearn_fdp import FeatureDPLogisticRegression"],
}
COMPARED = ("python -c 'import sklearn_fdp'", "sklearn-fdp --version")


def _time(argv, source):
    env = {**os.environ, "PYTHONPATH": str(source)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *argv], cwd=source, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed in {source}:\n{done.stderr}")
    return elapsed


def _extract(ref, into):
    archive = pathlib.Path(into) / "src.tar"
    with open(archive, "wb") as fh:
        subprocess.run(["git", "archive", ref, "sklearn_fdp"], cwd=ROOT, stdout=fh, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    commit = subprocess.run(["git", "rev-parse", ref], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.strip()
    return commit


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--compare", default=None, metavar="REF",
                        help="also time the sklearn_fdp of this git commit")
    args = parser.parse_args()

    runs = [(name, argv, ROOT) for name, argv in COMMANDS.items()]
    with tempfile.TemporaryDirectory() as tmp:
        compare_commit = None
        if args.compare:
            compare_commit = _extract(args.compare, tmp)
            runs += [(f"{name} [{args.compare}]", COMMANDS[name], pathlib.Path(tmp))
                     for name in COMPARED]
        for _, argv, source in runs:  # warm-up: file cache, .pyc files
            _time(argv, source)
        times = {name: [] for name, _, _ in runs}
        for _ in range(args.repeats):
            for name, argv, source in runs:
                times[name].append(_time(argv, source))

    rows = {name: dict(median_s=statistics.median(t), min_s=min(t), max_s=max(t),
                       runs_s=[round(x, 4) for x in t])
            for name, t in times.items()}
    result = dict(
        what="wall-clock seconds of fresh interpreters (median of the repeats)",
        repeats=args.repeats, python=platform.python_version(),
        machine=f"{platform.machine()}, {os.cpu_count()} CPUs, load average "
                f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} at the end",
        compare=None if not args.compare else dict(ref=args.compare, commit=compare_commit),
        commands=rows, **library_fingerprint())
    if result["git_head"] == "unknown":  # a git worktree: .git is a file, ask git
        result["git_head"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT,
                                            capture_output=True, text=True).stdout.strip()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "startup.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "# Start-up time",
        "",
        "`python benchmarks/bench_startup.py"
        + (f" --compare {args.compare}" if args.compare else "") + "`: each command in a "
        f"fresh interpreter, {args.repeats} interleaved rounds after a warm-up; Python "
        f"{result['python']}, {result['machine']}. The command line runs as "
        "`python -m sklearn_fdp`.",
        "",
        "| command | median (s) | min (s) | max (s) |",
        "|---|---:|---:|---:|",
    ]
    for name, row in rows.items():
        lines.append(f"| `{name}` | {row['median_s']:.3f} | {row['min_s']:.3f} | "
                     f"{row['max_s']:.3f} |")
    if args.compare:
        lines += ["", f"`[{args.compare}]`: the package as of commit {compare_commit[:12]}."]
    lines += ["", f"Source: commit {result['git_head'][:12]}, sources sha256 "
                  f"{result['sklearn_fdp_sources_sha256'][:12]}."]
    (RESULTS / "startup.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
