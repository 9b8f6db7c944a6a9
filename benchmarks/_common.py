"""Helpers shared by the benchmark scripts (run as ``python benchmarks/bench_*.py``)."""

import hashlib
import json
import os
import pathlib
import resource
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
OPACUS_PY = ROOT / ".venv-opacus" / "bin" / "python"
# The thread pools a speed benchmark pins to one thread (its own before numpy is imported,
# with ``one_thread()``; its children's with ``child_env``).
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def one_thread():
    """One thread for every pool of this process: call it before numpy is imported."""
    for var in THREAD_VARS:
        os.environ[var] = "1"


def cpu_seconds(who=resource.RUSAGE_SELF):
    """User + system CPU seconds of this process (or of its finished children)."""
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def child_env(**extra):
    """The environment of a child Python: one thread per pool, warnings off, this checkout
    on ``PYTHONPATH``, plus ``extra``."""
    env = {**os.environ, **{v: "1" for v in THREAD_VARS}, "PYTHONWARNINGS": "ignore",
           "PYTHONPATH": str(ROOT)}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_child(argv, **env):
    """Run a child Python; return (its last stdout line that is a JSON object, wall seconds,
    CPU seconds including its children, its stderr). A failed child raises RuntimeError."""
    c0, w0 = cpu_seconds(resource.RUSAGE_CHILDREN), time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=child_env(**env))
    wall, cpu = time.perf_counter() - w0, cpu_seconds(resource.RUSAGE_CHILDREN) - c0
    if done.returncode != 0:
        raise RuntimeError(f"child {argv[1:4]} failed:\n{done.stdout[-3000:]}\n"
                           f"{done.stderr[-3000:]}")
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    return (json.loads(lines[-1]) if lines else {}), wall, cpu, done.stderr


def summarise_accuracy(lines, epsilons, no_privacy_key):
    """name -> column -> (mean, std, n) of the runs' ``test_accuracy`` at each ε of
    ``epsilons`` (column ``str(ε)``) and without privacy (ε None: ``no_privacy_key``)."""
    import numpy as np

    table = {}
    for name, results in lines.items():
        row = {}
        for eps in [None] + list(epsilons):
            accs = [r["test_accuracy"] for r in results if r["epsilon"] == eps]
            if accs:
                row[no_privacy_key if eps is None else str(eps)] = (
                    float(np.mean(accs)), float(np.std(accs)), len(accs))
        table[name] = row
    return table


def accuracy_rows(table, cols, no_privacy_key):
    """Markdown rows of a :func:`summarise_accuracy` table: mean ± std at each column of
    ``cols``, then the mean without privacy."""
    out = []
    for name, row in table.items():
        cells = [f"{row[c][0]:.4f} ± {row[c][1]:.4f}" if c in row else "" for c in cols]
        cells.append(f"{row[no_privacy_key][0]:.4f}" if no_privacy_key in row else "")
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out


def epsilon_ticks(ax, epsilons):
    """Ticks at exactly the ε values of a log axis, labelled with ``:g``."""
    ax.set_xticks(epsilons, [f"{e:g}" for e in epsilons])
    ax.minorticks_off()


def save_figure(fig, path):
    """Lay out ``fig``, write it to ``path`` (120 dpi; folders created) and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_json_and_markdown(stem, result, markdown):
    """Write ``result`` to ``<stem>.json`` and the text ``markdown`` to ``<stem>.md``
    (``stem`` a path without suffix), and print the text."""
    stem = pathlib.Path(stem)
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    stem.with_suffix(".md").write_text(markdown)
    print(markdown)


def library_fingerprint():
    """Which sklearn_fdp source a run used: the commit and a hash of the sources.

    Reads ``.git/HEAD`` as a file (no git process is started); uncommitted
    changes show up only in the hash of the ``sklearn_fdp`` sources.
    """
    h = hashlib.sha256()
    for path in sorted((ROOT / "sklearn_fdp").rglob("*.py")):
        h.update(str(path.relative_to(ROOT)).encode())
        h.update(path.read_bytes())
    head = "unknown"
    try:
        ref = (ROOT / ".git" / "HEAD").read_text().strip()
        if ref.startswith("ref: "):
            ref_path = ROOT / ".git" / ref[5:]
            head = ref_path.read_text().strip() if ref_path.exists() else ref
        else:
            head = ref
    except OSError:
        pass
    return dict(git_head=head, sklearn_fdp_sources_sha256=h.hexdigest())


def run_meta(cpu_minutes):
    """The first entries of a study's saved run: date, machine, Python, the library's
    fingerprint (``library``) and the CPU minutes it took."""
    import platform

    return dict(date=time.strftime("%Y-%m-%d"), machine=platform.machine(),
                python=platform.python_version(), library=library_fingerprint(),
                cpu_minutes=cpu_minutes)


def study_title(title, script, saved):
    """The first line of a study's Markdown: ``title`` and how :func:`run_meta` says it
    was generated (``script``: the study's ``__file__``)."""
    return (f"# {title} (generated by `benchmarks/studies/{pathlib.Path(script).name}` on "
            f"{saved['date']}, {saved['machine']}, Python {saved['python']}, "
            f"{saved['cpu_minutes']:.1f} CPU min)")


def save_run(stem, saved, markdown):
    """Write ``saved`` to ``results/<stem>.json`` and ``markdown(saved)`` to
    ``results/<stem>.md``, and print the text."""
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(saved, indent=1))
    text = markdown(saved)
    (RESULTS / f"{stem}.md").write_text(text)
    print(text)


def points_interval(d):
    """Mean and half-width of the 95 % t interval of the fractions ``d``, in points."""
    import math

    import numpy as np
    from scipy import stats

    d = 100.0 * np.asarray(d, dtype=float)
    half = stats.t.ppf(0.975, d.size - 1) * d.std(ddof=1) / math.sqrt(d.size)
    return d.mean(), half


def write_results(stem, meta, rows, lines):
    """Write ``results/<stem>.json`` (meta and rows) and ``results/<stem>.md`` (the
    lines of its Markdown table), and print the table."""
    results = ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    (results / f"{stem}.json").write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))
    (results / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def table_head(title, meta, note, text, columns):
    """The first lines of a results table: title, date and load average (with a note on
    the machine), a line of text, the header."""
    return [f"# {title}", "",
            f"{meta['date']}; load average {meta['load_start']:.2f} -> {meta['load_end']:.2f} "
            f"({note}). {text}", "", "| " + " | ".join(columns) + " |",
            "|" + "---|" * len(columns)]


def peak_rss_mib():
    """This process's peak resident set (``VmHWM``) in MiB (NaN where /proc is missing)."""
    status = pathlib.Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run_result_child(cmd):
    """Run a benchmark's child process ``cmd``; its last ``RESULT {json}`` line, parsed."""
    import json
    import subprocess
    import sys

    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"child failed: {cmd}")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])
