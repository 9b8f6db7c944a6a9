"""Helpers shared by the benchmark scripts (run as ``python benchmarks/bench_*.py``)."""

import hashlib
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


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


def write_results(stem, meta, rows, lines):
    """Write ``results/<stem>.json`` (meta and rows) and ``results/<stem>.md`` (the
    lines of its Markdown table), and print the table."""
    import json

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


def run_child(cmd):
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
