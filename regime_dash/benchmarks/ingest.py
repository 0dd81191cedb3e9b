"""Ingest benchmark: our store ingest vs DuckDB ``read_json`` -> Parquet vs pyarrow.

``python -m regime_dash bench ingest [--size-mb 100] [--repeat 3] [--peak-mb 1000] [--bomb-gib 4]``

All contenders read the same generated, nested diag.jsonl file (the diag contract's
fields, ~1 KB a line, some NaN tokens) in the same process run, interleaved, median of
``--repeat`` (the machine is shared: every ratio is from one run). Ours is warmed up once,
untimed, with the shape path's kernels loaded (as in the app, which has numba):

* ``ours``: ``RunStore.ingest`` end to end (sha256, parse, quarantine, Parquet parts,
  meta, atomic rename);
* ``duckdb``: ``COPY (SELECT * FROM read_json(file)) TO 'x.parquet'`` (struct columns,
  no flattening, fails on a bad line instead of quarantining it);
* ``pyarrow``: ``pyarrow.json.read_json(file)`` (read only), and the same plus
  ``pyarrow.parquet.write_table`` of the flattened table.

``ours_cli_end_to_end`` is a fresh ``python -m regime_dash ingest FILE --store DIR``
process against a fresh ``python -c "import duckdb; duckdb.sql('COPY ...')"`` one,
interpreter start and imports included, timed in pairs, :data:`CLI_PAIRS` a round (one
process is a noisy sample on a shared machine; the ratio is of the medians of all of
them). The package's bytecode is compiled first, as
installing a wheel compiles it (DuckDB's was at its install): an editable checkout under
``PYTHONDONTWRITEBYTECODE`` would otherwise compile every module in every process.

``ours_with_rejects`` ingests a copy of the file with one bad line in 5,000 (the others
cannot read it at all); ``ours_blank_lines`` a file of the same size holding only blank
lines (a flood of them must stream like real data). Peak memory is sampled in a fresh subprocess that ingests a
generated file of ``--peak-mb`` MB, next to one that ingests a 10 MB file: the RSS the
ingest adds on top of the interpreter and its imports, so the figure shows what grows
with the file size (nothing should).

``--bomb-gib N`` writes a gzip bomb (a few MB that expand to N GiB of zero bytes with no
line break, between good lines) and measures the peak RSS of ingesting it through the
CLI, through the Runs page's upload path (streamlit's AppTest driving the real page,
which hands the upload to ``RunStore.ingest`` as streamlit's ``UploadedFile``), and
both at once into one store. Peak RSS is the kernel's figure for each child process
(``os.wait4``), not a sample.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from regime_dash.benchmarks.timing import Stopwatch, best_of

#: The diag contract's layout as a %-template of one line (json.dumps spacing).
_TEMPLATE = (
    '{"step": %d, "fold": %d, "phase": "%s", "wall_time": %r, "risk_stack": {'
    '"kelly": {"fraction": %r, "analytic": %r, "safety_frac": 0.5, "cooldown_remaining": %d}, '
    '"positions": {"flat_count": %d, "b_size": 1024}, "session_pnl": {"worst": %r}, '
    '"popart": {"mean": %r, "var": %r, "sigma": %r}, '
    '"iqn": {"tau_min": 0.05, "tau_min_effective": %r, "tau_action": %r}, '
    '"regime": {"dead_zone": {"flag": %s, "duration": %d, "timeout_flag": false, "max_duration": 2000}, '
    '"transition": {"remaining": %d, "steps_config": 100, "decay_steps_config": 50}, '
    '"tail": {"recency": %d, "session_pnl_variance_ema": %r, "sigma_threshold": 3.0, "welford_count": %r}, '
    '"kelly_eps_recovery": {"factor": %r, "live": %s, "min": 0.01, "max": 0.2, "n_recovery": 500}, '
    '"popart_envelope": {"max_abs_reward_ema": %s, "decay_alpha": 0.001}, '
    '"iqn_tau_boost": {"factor": %r, "n_window": 200}}}}\n'
)

_BAD_LINES = (
    '{"step": 1, "risk_stack": {"kelly": {"fraction": 0.5',  # crashed mid-line
    "not json at all",
    "[1, 2, 3]",
    '{"step": 2} {"step": 3}',
)


def make_diag_file(path: str | os.PathLike, size_mb: float, *, seed: int = 0,
                   bad_every: int = 0, late_key: bool = True) -> int:
    """Write a synthetic nested diag.jsonl of about ``size_mb`` MB.

    Parameters
    ----------
    path
        Output file.
    size_mb
        Target size in MB (10**6 bytes).
    seed
        RNG seed (the same seed gives the same bytes).
    bad_every
        Every this many lines, write a bad line instead (0: none).
    late_key
        Add a key that first appears in the last 1 % of the file.

    Returns
    -------
    int
        Lines written.
    """
    rng = np.random.default_rng(seed)
    target = int(size_mb * 1e6)
    written = 0
    step = 0
    lines = 0
    block = int(min(4096, max(16, target // 1100)))  # ~1.1 KB a line
    late_from = None
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        while written < target:
            u = rng.random((block, 14))
            ints = rng.integers(0, 1024, (block, 5))
            nan = rng.random(block) < 0.01
            out = []
            for i in range(block):
                if bad_every and lines and lines % bad_every == 0:
                    out.append(_BAD_LINES[(lines // bad_every) % len(_BAD_LINES)] + "\n")
                    lines += 1
                    continue
                r = u[i]
                line = _TEMPLATE % (
                    step, step // 10000, "eval" if r[0] < 0.1 else "train", 1.7e9 + step * 0.25,
                    float(r[1]), float(r[2]), int(ints[i, 0] % 6), int(ints[i, 1]),
                    -10 * float(r[3]), float(r[4]) - 0.5, float(r[5]), float(r[6]),
                    float(r[7]), float(r[8]), "true" if r[9] < 0.1 else "false",
                    int(ints[i, 2] % 500), int(ints[i, 3] % 101) - 1, int(ints[i, 4]),
                    float(r[10]), float(step), float(r[11]), "true" if r[12] < 0.5 else "false",
                    "NaN" if nan[i] else repr(float(r[13])), float(r[12]))
                if late_key and late_from is not None:
                    line = line[:-2] + ', "late": {"key": %d}}\n' % step
                out.append(line)
                step += 1
                lines += 1
            chunk = "".join(out)
            fh.write(chunk)
            written += len(chunk)
            if late_key and late_from is None and written > 0.99 * target:
                late_from = lines
    return lines


def write_gzip_bomb(path: str | os.PathLike, expanded_mib: int, good: int = 50) -> Path:
    """Write ``good`` diag lines, one line of ``expanded_mib`` MiB of zero bytes (no line
    break inside), and ``good`` more, gzip-compressed block by block (nothing holds the
    expansion; 4 GiB compress to about 4 MB).

    Returns
    -------
    pathlib.Path
    """
    def lines(start: int) -> bytes:
        return b"".join(b'{"step": %d, "fold": 0, "phase": "train", "risk_stack": {"popart": '
                        b'{"sigma": %d.5}}}\n' % (i, i) for i in range(start, start + good))

    z = zlib.compressobj(1, zlib.DEFLATED, 31)  # wbits 31: a gzip member
    block = bytes(1 << 20)
    with open(path, "wb") as fh:
        fh.write(z.compress(lines(0)))
        for _ in range(expanded_mib):
            fh.write(z.compress(block))
        fh.write(z.compress(b"\n" + lines(good)))
        fh.write(z.flush())
    return Path(path)


def child_env() -> dict:
    """This environment with the repository on ``PYTHONPATH`` (for child processes)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return env


# Linux carries a process's peak RSS across exec, and a child forked from a big process
# starts with that process's pages: measured directly, a child of a test run would report
# the test run's RSS. A small launcher (a bare interpreter) starts the measured command
# and reads its peak with os.wait4, so only the launcher's few MB can leak into it.
_LAUNCHER = """
import os, subprocess, sys
p = subprocess.Popen(sys.argv[2:])
_pid, status, usage = os.wait4(p.pid, 0)
with open(sys.argv[1], "w") as fh:
    fh.write(str(usage.ru_maxrss * 1024))
sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)
"""


def start_child(args: list[str], cwd: str | os.PathLike | None = None, env: dict | None = None,
                preexec_fn=None) -> tuple[subprocess.Popen, Any, Any, str]:
    """Start a measured child process (through a small launcher, see above), its output
    in temporary files (no pipe can fill up)."""
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    fd, rss_file = tempfile.mkstemp(prefix="rd-rss-")
    os.close(fd)
    proc = subprocess.Popen([sys.executable, "-S", "-c", _LAUNCHER, rss_file, *args], cwd=cwd,
                            env=env or child_env(), stdout=out, stderr=err, preexec_fn=preexec_fn)
    return proc, out, err, rss_file


def finish_child(proc: subprocess.Popen, out, err, rss_file: str) -> tuple[int, str, str, int]:
    """Wait for a :func:`start_child` child: (exit status, stdout, stderr, peak RSS bytes),
    the peak from the kernel's accounting of that one process."""
    proc.wait()
    texts = []
    for fh in (out, err):
        fh.seek(0)
        texts.append(fh.read().decode("utf-8", "replace"))
        fh.close()
    try:
        with open(rss_file) as fh:
            rss = int(fh.read() or 0)
    finally:
        os.unlink(rss_file)
    return proc.returncode, texts[0], texts[1], rss


def cli_args(*args: str) -> list[str]:
    """``python -m regime_dash ARGS`` with this interpreter."""
    return [sys.executable, "-m", "regime_dash", *args]


def app_upload_args(store: str | os.PathLike, path: str | os.PathLike) -> list[str]:
    """A child that uploads ``path`` through the Runs page into ``store``
    (:mod:`regime_dash.ui.upload_probe`); run it from the repository root."""
    return [sys.executable, "-m", "regime_dash.ui.upload_probe", str(store), str(path)]


def bomb_peaks(work: Path, expanded_gib: float) -> dict[str, Any]:
    """Peak RSS of ingesting a gzip bomb through the CLI, the app, and both at once."""
    repo = Path(__file__).resolve().parents[2]
    mib = int(expanded_gib * 1024)
    with Stopwatch() as sw:
        bomb = write_gzip_bomb(work / "bomb.diag.jsonl.gz", mib)
    out: dict[str, Any] = {"expanded_mib": mib, "gzip_mb": round(bomb.stat().st_size / 1e6, 1),
                           "write_s": round(sw.seconds, 1)}

    def check(rc: int, text: str, err: str) -> None:
        if rc != 0:
            raise RuntimeError(f"bomb ingest failed (rc {rc}): {err[-2000:]}")

    with Stopwatch() as sw:
        rc, o, e, cli = finish_child(*start_child(cli_args("ingest", str(bomb), "--store", str(work / "s1"))))
        check(rc, o, e)
    out["cli"] = {"peak_rss_mb": round(cli / 2**20, 1), "s": round(sw.seconds, 1)}
    with Stopwatch() as sw:
        rc, o, e, app = finish_child(*start_child(app_upload_args(work / "s2", bomb), cwd=repo))
        check(rc, o, e)
    out["app"] = {"peak_rss_mb": round(app / 2**20, 1), "s": round(sw.seconds, 1),
                  "page": o.strip().splitlines()[1] if o.strip() else ""}
    with Stopwatch() as sw:
        a = start_child(cli_args("ingest", str(bomb), "--store", str(work / "s3")))
        b = start_child(app_upload_args(work / "s3", bomb), cwd=repo)
        ra, b_ = finish_child(*a), finish_child(*b)
        check(*ra[:3])
        check(*b_[:3])
    out["both_at_once"] = {"cli_peak_rss_mb": round(ra[3] / 2**20, 1),
                           "app_peak_rss_mb": round(b_[3] / 2**20, 1),
                           "s": round(sw.seconds, 1)}
    return out


def _time_ours(path: Path, work: Path, repeat: int) -> float:
    from regime_dash.store.run_store import RunStore

    def once():
        root = work / "store"
        shutil.rmtree(root, ignore_errors=True)
        RunStore(root).ingest(path)

    return best_of(once, repeat)


def _time_duckdb(path: Path, work: Path, repeat: int) -> float | None:
    try:
        import duckdb
    except ImportError:
        return None
    out = work / "duck.parquet"

    def once():
        con = duckdb.connect()
        try:
            con.execute("COPY (SELECT * FROM read_json(?)) TO '%s' (FORMAT parquet)"
                        % str(out).replace("'", "''"), [str(path)])
        finally:
            con.close()

    return best_of(once, repeat)


#: Pairs of fresh processes (ours, then DuckDB's) timed in each round of ``--repeat``.
CLI_PAIRS = 3


def _time_cli(path: Path, work: Path) -> tuple[float, float]:
    """Seconds of one fresh ``python -m regime_dash ingest`` process and of one fresh
    ``python -c "import duckdb; duckdb.sql('COPY ...')"`` process on ``path``: end to end,
    interpreter start and imports included."""
    store = work / "cli-store"
    shutil.rmtree(store, ignore_errors=True)
    out = str(work / "cli-duck.parquet").replace("'", "''")
    src = str(path).replace("'", "''")
    duck = ("import duckdb; duckdb.sql(\"COPY (SELECT * FROM read_json('%s')) TO '%s' "
            "(FORMAT parquet)\")" % (src, out))
    times = []
    for args in (cli_args("ingest", str(path), "--store", str(store)), [sys.executable, "-c", duck]):
        with Stopwatch() as sw:
            subprocess.run(args, env=child_env(), check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        times.append(sw.seconds)
    return times[0], times[1]


def compile_bytecode() -> None:
    """Compile the package's modules to ``__pycache__`` (what ``pip install`` of the wheel does)."""
    import compileall

    compileall.compile_dir(str(Path(__file__).resolve().parents[1]), quiet=2)


def warm_shapes() -> str | None:
    """Load the shape path's kernels (the built-in scanner, or numba's as a process that has
    numba, the app, has them after its first large ingest); which loaded: "C" or "numba"
    (``None``: neither)."""
    from regime_dash.ingest import shapes

    k = shapes.wait_loaded()
    return None if k is None else "C" if k is shapes.native() else "numba"


def _time_pyarrow(path: Path, work: Path, repeat: int) -> tuple[float, float]:
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    read = best_of(lambda: pj.read_json(path), repeat)

    def read_write():
        t = pj.read_json(path)
        while any(str(f.type).startswith("struct") for f in t.schema):
            t = t.flatten()
        pq.write_table(t, work / "pa.parquet")

    return read, best_of(read_write, repeat)


_PEAK_CHILD = """
import sys, threading, time
from regime_dash.store.run_store import RunStore

def rss():
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) * 1024
    return 0

base = rss()  # after the imports: what the ingest itself adds is measured from here
peak = [base]
stop = threading.Event()
def sample():
    while not stop.is_set():
        peak[0] = max(peak[0], rss())
        time.sleep(0.002)
t = threading.Thread(target=sample, daemon=True)
t.start()
t0 = time.perf_counter()
if sys.argv[1] != '-':
    RunStore(sys.argv[2]).ingest(sys.argv[1])
dt = time.perf_counter() - t0
stop.set(); t.join()
peak[0] = max(peak[0], rss())
print(base, peak[0], dt)
"""


def peak_rss(path: str | None, store: str) -> tuple[int, int, float]:
    """Ingest ``path`` in a fresh interpreter ('-' or None: nothing) and sample its RSS.

    Returns
    -------
    base, peak, seconds
        RSS after the imports, the highest RSS seen during the ingest (sampled every
        2 ms from ``/proc/self/status``), and the ingest time.
    """
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", _PEAK_CHILD, path or "-", store],
                         capture_output=True, text=True, env=env, check=True)
    base, peak, dt = out.stdout.split()
    return int(base), int(peak), float(dt)


def _inputs(tmp: Path, size_mb: float) -> tuple[Path, Path, Path]:
    """The three files timed: a clean diag, the same with one bad line in 5,000, and a flood of blank lines."""
    clean = tmp / "diag.jsonl"
    make_diag_file(clean, size_mb, seed=1)
    dirty = tmp / "diag_bad.jsonl"
    make_diag_file(dirty, size_mb, seed=1, bad_every=5000)
    blank = tmp / "blank.jsonl"
    with open(blank, "wb") as fh:  # a flood of blank lines, mixed LF / CRLF / padding
        piece = (b"\n" * 50 + b"\r\n" * 20 + b"   \t\n" * 10) * 4096
        for _ in range(max(1, int(size_mb * 1e6 / len(piece)))):
            fh.write(piece)
        fh.write(b'{"step": 0}\n')  # one row, so the run is stored
    return clean, dirty, blank


def _timings(clean: Path, dirty: Path, blank: Path, tmp: Path, repeat: int) -> dict[str, list]:
    """Seconds of each contender, ``repeat`` rounds (:data:`CLI_PAIRS` CLI pairs a round), interleaved so
    load from other processes hits them alike."""
    t: dict[str, list] = {k: [] for k in ("ours", "duck", "pa", "pa_w", "bad", "blank", "cli", "cli_duck")}
    for _ in range(repeat):
        for _pair in range(CLI_PAIRS):
            c, d = _time_cli(clean, tmp)
            t["cli"].append(c)
            t["cli_duck"].append(d)
        t["duck"].append(_time_duckdb(clean, tmp, 1))
        t["ours"].append(_time_ours(clean, tmp, 1))
        r, w = _time_pyarrow(clean, tmp, 1)
        t["pa"].append(r)
        t["pa_w"].append(w)
        t["bad"].append(_time_ours(dirty, tmp, 1))
        t["blank"].append(_time_ours(blank, tmp, 1))
    return t


def _throughput(t: dict[str, list], mb: float, mb_dirty: float, mb_blank: float) -> dict[str, Any]:
    """MB/s of each contender (medians of ``t``), the ratios between them and the targets met."""
    med = statistics.median
    ours, bad = med(t["ours"]), med(t["bad"])
    duck = None if None in t["duck"] else med(t["duck"])
    res: dict[str, Any] = {"mb_per_s": {
        "ours": round(mb / ours, 1),
        "ours_with_rejects": round(mb_dirty / bad, 1),
        "ours_blank_lines": round(mb_blank / med(t["blank"]), 1),
        "ours_cli_end_to_end": round(mb / med(t["cli"]), 1),
        "duckdb_fresh_process_end_to_end": round(mb / med(t["cli_duck"]), 1),
        "duckdb_read_json_to_parquet": None if duck is None else round(mb / duck, 1),
        "pyarrow_read_json": round(mb / med(t["pa"]), 1),
        "pyarrow_read_json_to_parquet": round(mb / med(t["pa_w"]), 1),
    }}
    if duck is not None:
        res["ratio_vs_duckdb"] = round(duck / ours, 2)
        # one bad line in 5,000 against DuckDB on the clean file (it cannot read the other)
        res["rejects_ratio_vs_duckdb_clean"] = round((mb_dirty / bad) / (mb / duck), 2)
    res["cli_ratio_vs_duckdb_process"] = round(med(t["cli_duck"]) / med(t["cli"]), 2)
    res["targets_met"] = {
        "ingest >= 1.5x duckdb": duck is not None and duck / ours >= 1.5,
        "one bad line in 5,000 >= 1.2x duckdb": duck is not None and (mb_dirty / bad) / (mb / duck) >= 1.2,
        "cli >= 1.0x a fresh duckdb process": med(t["cli_duck"]) / med(t["cli"]) >= 1.0,
    }
    res["blank_lines_ratio_vs_clean"] = round((mb_blank / med(t["blank"])) / (mb / ours), 2)
    res["ratio_vs_pyarrow_read_json"] = round(med(t["pa"]) / ours, 2)
    return res


def _peak_memory(tmp: Path, peak_mb: float) -> dict[str, Any]:
    """Peak RSS of ingesting a ``peak_mb`` file, and what a 10 MB one adds, each in a fresh interpreter."""
    small = tmp / "small.jsonl"
    make_diag_file(small, 10, seed=2)
    b_small, p_small, _ = peak_rss(str(small), str(tmp / "s1"))
    big = tmp / "big.jsonl"
    make_diag_file(big, peak_mb, seed=3)
    b_big, p_big, dt = peak_rss(str(big), str(tmp / "s2"))
    return {
        "file_mb": round(big.stat().st_size / 1e6, 1),
        "rss_after_imports_mb": round(b_big / 2**20, 1),
        "peak_rss_mb": round(p_big / 2**20, 1),
        "ingest_adds_mb": round((p_big - b_big) / 2**20, 1),
        "ingest_adds_10mb_file_mb": round((p_small - b_small) / 2**20, 1),
        "mb_per_s": round(big.stat().st_size / 1e6 / dt, 1),
    }


def run_benchmark(size_mb: float = 100.0, repeat: int = 3, peak_mb: float = 0.0,
                  workdir: str | None = None, bomb_gib: float = 0.0) -> dict[str, Any]:
    """Run the ingest benchmark and return its figures.

    Parameters
    ----------
    size_mb
        Size of the generated diag file for the throughput comparison.
    repeat
        Timings per contender; the best is kept.
    peak_mb
        If > 0, also measure the peak RSS of ingesting a file this large (e.g. 1000).
    workdir
        Scratch directory (a temporary one by default; removed afterwards).
    bomb_gib
        If > 0, also measure the peak RSS of ingesting a gzip bomb that expands to this
        many GiB (CLI, app upload path, both at once).

    Returns
    -------
    dict
        ``mb_per_s`` per contender, ``ratio_vs_duckdb``, sizes, and peak memory figures.
    """
    import duckdb  # noqa: F401 - fail early with a clear ImportError
    import pyarrow

    tmp = Path(tempfile.mkdtemp(prefix="rd-bench-", dir=workdir))
    try:
        clean, dirty, blank = _inputs(tmp, size_mb)
        mb = clean.stat().st_size / 1e6
        mb_dirty = dirty.stat().st_size / 1e6
        mb_blank = blank.stat().st_size / 1e6
        shapes_loaded = warm_shapes()
        compile_bytecode()
        _time_ours(clean, tmp, 1)  # untimed warm-up: page cache, the kernels
        t = _timings(clean, dirty, blank, tmp, repeat)
        res: dict[str, Any] = {
            "file_mb": round(mb, 1),
            "repeat": repeat,
            "cli_samples": len(t["cli"]),
            "shape_path_loaded": shapes_loaded,
            "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "versions": {"pyarrow": pyarrow.__version__, "duckdb": duckdb.__version__,
                         "python": sys.version.split()[0]},
        }
        res.update(_throughput(t, mb, mb_dirty, mb_blank))
        if peak_mb > 0 or bomb_gib > 0:
            shutil.rmtree(tmp / "store", ignore_errors=True)
            for p in (clean, dirty, blank):
                p.unlink()
        if bomb_gib > 0:
            res["gzip_bomb"] = bomb_peaks(tmp, bomb_gib)
        if peak_mb > 0:
            res["peak_memory"] = _peak_memory(tmp, peak_mb)
        return res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(args: argparse.Namespace) -> int:
    """``bench ingest``: run the benchmark and print its figures (options in :mod:`regime_dash.benchmarks.targets`)."""
    from regime_dash.errors import ValidationError

    if args.size_mb <= 0 or args.repeat < 1:
        raise ValidationError(f"--size-mb must be > 0 and --repeat >= 1, got "
                              f"{args.size_mb!r} and {args.repeat!r}", field="size_mb")
    res = run_benchmark(args.size_mb, args.repeat, args.peak_mb, args.workdir, args.bomb_gib)
    text = json.dumps(res, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    if args.json:
        print(text)
        return 0
    m = res["mb_per_s"]
    v = res["versions"]
    print(f"ingest benchmark, {res['file_mb']} MB nested diag.jsonl, median of {res['repeat']}, "
          f"{res['cpus']} CPUs; DuckDB {v['duckdb']}, pyarrow {v['pyarrow']}, Python {v['python']}"
          f"; shape path {res['shape_path_loaded'] or 'NOT'} loaded")
    for k, val in m.items():
        print(f"  {k:34s} {val:8.1f} MB/s")
    if "ratio_vs_duckdb" in res:
        print(f"  ours / DuckDB {v['duckdb']} = {res['ratio_vs_duckdb']:.2f}x; with one bad line in "
              f"5,000 / DuckDB on the clean file = {res['rejects_ratio_vs_duckdb_clean']:.2f}x")
    print(f"  CLI end to end / a fresh DuckDB {v['duckdb']} process = "
          f"{res['cli_ratio_vs_duckdb_process']:.2f}x (medians of {res['cli_samples']} pairs); "
          f"blank-line flood / clean = "
          f"{res['blank_lines_ratio_vs_clean']:.2f}x")
    for name, met in res["targets_met"].items():
        print(f"  target {name}: {'met' if met else 'NOT met'}")
    if "gzip_bomb" in res:
        gb = res["gzip_bomb"]
        print(f"  gzip bomb ({gb['gzip_mb']} MB expanding to {gb['expanded_mib']} MiB): peak RSS "
              f"CLI {gb['cli']['peak_rss_mb']} MB, app upload {gb['app']['peak_rss_mb']} MB, both at "
              f"once {gb['both_at_once']['cli_peak_rss_mb']} / {gb['both_at_once']['app_peak_rss_mb']} MB")
    if "peak_memory" in res:
        pm = res["peak_memory"]
        print(f"  ingesting {pm['file_mb']} MB adds {pm['ingest_adds_mb']} MB to the RSS "
              f"(peak {pm['peak_rss_mb']} MB, {pm['rss_after_imports_mb']} MB after imports); "
              f"a 10 MB file adds {pm['ingest_adds_10mb_file_mb']} MB")
    return 0
