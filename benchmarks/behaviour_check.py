"""Behaviour check of a refactoring: the examples and the subcommands run with two code trees,
their outputs compared file by file.

``run`` runs a fixed set of cases (``cases`` lists them) through the CLI, each a subprocess with
one thread, the tree's ``meanfield`` package first on ``PYTHONPATH`` (called as the entry point
does, ``meanfield.cli:main``): every config of ``runs/examples`` shortened to t = 1 (fewer outputs
where thousands would fall into it), two hybrid runs long enough for atoms, a PDE and a particle
run on 2 ranks, particle runs (S^1, S^2, causal), ``clusters``, ``resume --t-final`` (PDE,
hybrid, particles), ``check``, ``info``, ``response`` (observables and retrieval), ``validate``,
``convergence``, ``sweep``, ``longtime``, ``compare``, ``plot`` and ``collect``.  The examples are
copied from the tree into ``OUT/examples`` and run from ``OUT``, so the paths recorded in the
outputs are the same for both trees; ``OUT/terminal`` keeps each command's stdout and stderr,
``OUT/cases.json`` its command line, exit status and wall time.

``compare`` compares two such output roots file by file: npz arrays (a checkpoint's JSON header key
by key), run.nc and other HDF5 files (every dataset, every attribute), CSV (every column; numbers
exactly, else the largest difference), JSON such as metadata.json (every key: values, keys that
appear or disappear), PNG pictures by their pixels, GIF and MP4 by their bytes, and every other
file (config.toml, XDMF, logs, the terminal output) as text.  Left out is only what differs from
one run to the next of the same code (``VOLATILE_*`` below, found by running one tree twice):
wall times and timings, timestamps, the paths of the output root and the code tree, measured
costs in ``check``'s text, and the warnings that writing outputs dominates (printed or not by
measured times); the summary lists what was left out, file by file with ``--all``.

    python benchmarks/behaviour_check.py run TREE OUT [--only CASE ...]
    python benchmarks/behaviour_check.py compare OUT_A OUT_B [--all]
    python benchmarks/behaviour_check.py cases

``TREE`` is a directory holding the ``meanfield`` package and ``runs/examples`` (``git archive REV
meanfield runs/examples | tar -x -C TREE``).  ``run`` takes about 4 minutes on one idle core;
``compare`` exits 1 when a file differs or is missing on one side.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CLI = "import sys; sys.argv[0] = 'meanfield'; from meanfield.cli import main; sys.exit(main())"
T1 = ["--set", "time.t_final=1"]


@dataclass
class Case:
    """One CLI command, run from the output root under ``mpirun -n ranks`` when ranks > 1;
    ``copy``: a run directory copied first (source, target), since resume works in place."""

    name: str
    argv: list[str]
    copy: tuple[str, str] | None = None
    note: str = ""
    ranks: int = 1


def example_cases(examples: list[str]) -> list[Case]:
    """``meanfield run`` of every example, shortened to t = 1 (with the exceptions noted)."""
    extra: dict[str, tuple[list[str], str]] = {
        # 4000 (400) outputs packed into t <= 1 would time the writing, not the run
        "s1-long-time": (["--set", "time.outputs=8"], "t_final=1 outputs=8"),
        "s2-long-time": (["--set", "time.outputs=8"], "t_final=1 outputs=8"),
        # t_final defaults to layers * eta; 4 layers of eta 0.25 reach t = 1
        "s2-random-init": (["--set", "model.random.layers=4"], "4 layers: t_final=1"),
    }
    cases = []
    for name in examples:
        args, note = extra.get(name, ([], ""))
        t1 = [] if name == "s2-random-init" else T1
        cases.append(Case(f"run-{name}", ["run", f"examples/{name}.toml", "--out", f"runs/{name}", *t1, *args],
                          note=note or "t_final=1"))
    return cases


def all_cases(examples: list[str]) -> list[Case]:
    """The fixed case list, in the order it runs (later cases read earlier ones' runs)."""
    hybrid_s1 = ["--set", "time.t_final=30", "--set", "time.outputs=30", "--set", "mesh.resolution=256"]
    hybrid_s2 = ["--set", "time.t_final=20", "--set", "time.outputs=20", "--set", "mesh.resolution=3"]
    return [
        *example_cases(examples),
        Case("hybrid-s1", ["run", "examples/s1-long-time.toml", "--out", "runs/hybrid-s1", *hybrid_s1],
             note="atoms captured and merged: t_final=30 outputs=30 resolution 256"),
        Case("hybrid-s2", ["run", "examples/s2-long-time.toml", "--out", "runs/hybrid-s2", *hybrid_s2],
             note="atoms captured: t_final=20 outputs=20 resolution 3"),
        Case("mpi2-s2-clusters", ["run", "examples/s2-clusters.toml", "--out", "runs/mpi2-s2-clusters", *T1],
             ranks=2, note="2 ranks, t_final=1"),
        Case("particles-s1", ["particles", "examples/s1-validation.toml", "--n", "400", "--seed", "3",
                              "--out", "runs/particles-s1", *T1], note="n=400 seed=3 t_final=1"),
        Case("particles-s2", ["particles", "examples/s2-clusters.toml", "--n", "2000",
                              "--out", "runs/particles-s2", *T1, "--set", "time.outputs=8"],
             note="fibonacci n=2000 t_final=1 outputs=8"),
        Case("particles-causal", ["particles", "examples/s1-causal.toml", "--n", "256",
                                  "--out", "runs/particles-causal", *T1], note="n=256 t_final=1"),
        Case("mpi2-particles-s1", ["particles", "examples/s1-validation.toml", "--n", "400", "--seed", "3",
                                   "--out", "runs/mpi2-particles-s1", *T1], ranks=2, note="2 ranks, n=400 t_final=1"),
        Case("clusters-pde", ["clusters", "runs/s1-clusters", "--out", "clusters/s1-clusters"]),
        Case("clusters-hybrid", ["clusters", "runs/hybrid-s2", "--out", "clusters/hybrid-s2"]),
        Case("clusters-particles", ["clusters", "runs/particles-s2", "--out", "clusters/particles-s2",
                                    "--resolution", "3"]),
        Case("resume-pde", ["resume", "resumed/s1-validation", "--t-final", "1.5"],
             copy=("runs/s1-validation", "resumed/s1-validation"), note="t 1 -> 1.5"),
        Case("resume-hybrid", ["resume", "resumed/hybrid-s1", "--t-final", "32"],
             copy=("runs/hybrid-s1", "resumed/hybrid-s1"), note="atoms, t 30 -> 32"),
        Case("resume-particles", ["resume", "resumed/particles-s1", "--t-final", "1.5"],
             copy=("runs/particles-s1", "resumed/particles-s1"), note="t 1 -> 1.5"),
        Case("check-s2-clustering", ["check", "examples/s2-clustering.toml", "--out", "runs/check", *T1]),
        Case("check-s1-causal", ["check", "examples/s1-causal.toml", "--out", "runs/check", "--ranks", "4", *T1]),
        Case("info-run", ["info", "runs/s2-clusters"]),
        Case("info-versions", ["info"]),
        Case("response-s1", ["response", "examples/s1-validation.toml", "--observable", "x",
                             "--observable", "c2=x**2 - y**2", "--at", "0.5,1", "--wrt", "model.beta",
                             "--out", "response/s1-validation", *T1, "--set", "mesh.resolution=256"],
             note="resolution 256, t_final=1"),
        Case("retrieval-s1", ["response", "examples/s1-clustered-prompt-retrieval.toml", "--retrieval", "--at", "1",
                              "--out", "response/retrieval", *T1], note="t_final=1"),
        Case("validate-s1", ["validate", "examples/s1-validation.toml", "--n", "100,400", "--pde", "runs/s1-validation",
                             "--no-refine", "--out", "studies/validate", *T1], note="n=100,400, the PDE run reused"),
        Case("convergence-s1", ["convergence", "examples/s1-validation.toml", "--levels", "6:8", "--reference",
                                "finest", "--out", "studies/convergence", "--set", "time.t_final=0.5"],
             note="2**6..2**8 cells, t_final=0.5"),
        Case("sweep-s2", ["sweep", "examples/s2-clustering.toml", "--grid", "model.beta=1.0,2.0",
                          "--out", "studies/sweep", "--set", "time.t_final=0.5"], note="beta 1, 2; t_final=0.5"),
        Case("longtime-s1", ["longtime", "examples/s1-long-time.toml", "--n", "256", "--t-final", "30",
                             "--run", "runs/hybrid-s1", "--out", "studies/longtime"], note="n=256 t_final=30"),
        Case("compare-runs", ["compare", "runs/s1-validation", "resumed/s1-validation", "-o", "compare/s1.csv"]),
        Case("plot-s1", ["plot", "runs/s1-validation"]),
        Case("plot-s2", ["plot", "runs/s2-clustering"]),
        Case("plot-hybrid", ["plot", "runs/hybrid-s1", "--no-movie"]),
        Case("collect-csv", ["collect", "runs", "-o", "collect/table.csv"]),
        Case("collect-nc", ["collect", "runs/s2-clustering", "runs/s2-random-init", "runs/s2-trained-looking",
                            "-o", "collect/final.nc", "--densities"]),
        Case("collect-clusters", ["collect", "runs/s1-clusters", "runs/s1-clustering", "-o",
                                  "collect/clusters.csv", "--clusters"]),
        Case("collect-sweep", ["collect", "studies/sweep", "-o", "collect/sweep.csv", "--final"]),
    ]


def thread_env(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_"))}
    env.update(PYTHONPATH=str(tree), MEANFIELD_NUM_THREADS="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1", PYTHONHASHSEED="0", COLUMNS="120", TZ="UTC")
    return env


def run_cases(tree: Path, out: Path, only: list[str], timeout: float) -> int:
    """Run the cases (or those named in ``only``) with the code of ``tree`` into ``out``; 1 if one failed."""
    tree, out = tree.resolve(), out.resolve()
    env = thread_env(tree)
    where = subprocess.run([sys.executable, "-c", "import meanfield; print(meanfield.__file__)"], env=env,
                           cwd=tree.parent, capture_output=True, text=True, check=True).stdout.strip()
    if not Path(where).is_relative_to(tree):
        sys.exit(f"the meanfield package imports from {where}, not from {tree}")
    (out / "examples").mkdir(parents=True, exist_ok=True)
    for folder in ("terminal", "collect", "compare", "studies"):
        (out / folder).mkdir(exist_ok=True)
    names = sorted(p.stem for p in (tree / "runs" / "examples").glob("*.toml"))
    for extra in (tree / "runs" / "examples").iterdir():
        if extra.is_file():
            shutil.copy2(extra, out / "examples")
    cases = [c for c in all_cases(names) if not only or c.name in only]
    record_path = out / "cases.json"
    record = json.loads(record_path.read_text()) if record_path.exists() else {"cases": {}}
    record.update(tree=str(tree), out=str(out), python=sys.executable)
    failed = 0
    for case in cases:
        if case.copy:
            src, dst = out / case.copy[0], out / case.copy[1]
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".lock"))
        launch = ["mpirun", "-n", str(case.ranks)] if case.ranks > 1 else []
        launcher = [str(Path(sys.executable).parent / "mpirun"), *launch[1:]] if launch else []
        tic = time.perf_counter()
        try:
            proc = subprocess.run([*launcher, sys.executable, "-c", CLI, *case.argv], env=env, cwd=out,
                                  capture_output=True, text=True, timeout=timeout)
            rc, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as exc:
            rc, stdout, stderr = -1, str(exc.stdout or ""), f"timed out after {timeout} s"
        wall = time.perf_counter() - tic
        (out / "terminal" / f"{case.name}.out").write_text(stdout)
        (out / "terminal" / f"{case.name}.err").write_text(stderr)
        record["cases"][case.name] = {"argv": [*launch, "meanfield", *case.argv], "rc": rc,
                                      "wall_s": round(wall, 2)}
        record_path.write_text(json.dumps(record, indent=1) + "\n")
        print(f"{case.name:28s} rc={rc} {wall:7.1f} s  {case.note}", flush=True)
        if rc != 0:
            failed += 1
            print(stderr[-1500:], file=sys.stderr)
    return 1 if failed else 0


# ---------------------------------------------------------------------------------------------
# compare

# What legitimately differs between two runs of the same code (found by running one tree twice).
VOLATILE_JSON_KEYS = re.compile(
    r"(^|\.)(host|pid|started|finished|updated|date|time_created|wall_s|wall|eta_s|eta|timings|"
    r"elapsed_s|costs|load_average|memory_available)(\.|$)"
    r"|^adjoint_memory\.budget(_bytes)?$")  # a share of the memory available when the run started
VOLATILE_CSV_COLUMNS = {"wall", "wall_s", "wall_time"}
VOLATILE_NC = re.compile(r"^(history|date_created|date_modified|wall.*)$")
# text: timestamps, clock times, durations (4m05s), and numbers with a unit of time or memory
VOLATILE_TEXT = [
    (re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?"), "<timestamp>"),
    (re.compile(r"\b\d\d:\d\d:\d\d\b"), "<clock>"),
    (re.compile(r"\b(\d+h)?\d+m\d\ds\b"), "<duration>"),
    (re.compile(r"\d+(\.\d+)?(e[+-]?\d+)? ?(ms|us|µs|s|min|h|MB|GB|kB|MiB|GiB)\b"), "<measured>"),
    (re.compile(r"load average [\d.]+"), "load average <measured>"),
]
# text lines written or not according to measured times: the run's warning that writing outputs
# dominated, and check's that they would (from the costs of its short measuring run)
VOLATILE_LINES = re.compile(r"writing dominates this run's cost|checkpoints would take .*more than the time stepping")
SKIP = {".lock"}
Clean = Callable[[str], str]


@dataclass
class Result:
    path: str
    status: str  # identical | equal | differ | only-a | only-b
    detail: str = ""
    max_diff: float = 0.0


def side_cleaner(root: Path) -> Clean:
    """Replace the output root's and the code tree's paths (recorded in cases.json) in a string."""
    record = json.loads((root / "cases.json").read_text()) if (root / "cases.json").exists() else {}
    subs = [(str(root.resolve()), "<out>"), (str(record.get("out", root.resolve())), "<out>")]
    if "tree" in record:
        subs.append((record["tree"], "<tree>"))
    subs.sort(key=lambda sub: -len(sub[0]))  # the tree's path may begin with the output root's

    def clean(text: str) -> str:
        for old, new in subs:
            text = text.replace(old, new)
        return text
    return clean


def _max_abs(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape or a.dtype.kind not in "fciub" or b.dtype.kind not in "fciub" or not a.size:
        return math.inf
    kind = np.complex128 if "c" in a.dtype.kind + b.dtype.kind else np.float64
    x, y = a.astype(kind), b.astype(kind)
    d = np.where((np.isnan(x) & np.isnan(y)) | (x == y), 0.0, np.abs(x - y))  # equal infinities: no difference
    return float(np.max(np.where(np.isnan(d), np.inf, d)))


def _equal(a: object, b: object) -> bool:
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    return bool(np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"))


def _flatten(obj: object, prefix: str = "") -> dict[str, object]:
    if isinstance(obj, dict) and obj:
        out: dict[str, object] = {}
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    if isinstance(obj, list) and obj and all(isinstance(v, dict) for v in obj):
        out = {}
        for i, v in enumerate(obj):
            out.update(_flatten(v, f"{prefix}{i}."))
        return out
    return {prefix.rstrip("."): obj}


def _contrast(a: object, b: object, width: int = 70) -> str:
    """Two values side by side; long strings from a little before their first difference."""
    sa, sb = str(a.decode(errors="replace") if isinstance(a, bytes) else a), \
        str(b.decode(errors="replace") if isinstance(b, bytes) else b)
    start = next((i for i, (x, y) in enumerate(zip(sa, sb)) if x != y), min(len(sa), len(sb)))
    start = max(0, start - 20) if max(len(sa), len(sb)) > width else 0
    dots = "..." if start else ""
    return f"{dots}{sa[start:start + width]!r} vs {dots}{sb[start:start + width]!r}"


def mask_text(text: str) -> list[str]:
    """The lines of a text with measured times masked and lines written by measured times left out."""
    for pattern, repl in VOLATILE_TEXT:
        text = pattern.sub(repl, text)
    return [line for line in text.splitlines() if not VOLATILE_LINES.search(line)]


class Pair:
    """Two files of one name under the two roots: their differences (``notes``, the largest
    numerical one ``worst``) and what differed but was left out as volatile (``ignored``)."""

    def __init__(self, a: Path, b: Path, ca: Clean, cb: Clean):
        self.a, self.b, self.ca, self.cb = a, b, ca, cb
        self.notes: list[str] = []
        self.ignored: set[str] = set()
        self.worst = 0.0

    def differ(self, note: str, diff: float = math.inf) -> None:
        self.notes.append(note)
        self.worst = max(self.worst, diff)

    def arrays(self, key: str, a: np.ndarray | None, b: np.ndarray | None) -> None:
        if a is None or b is None:
            self.differ(f"{key}: only in {'b' if a is None else 'a'}")
        elif not _equal(a, b):
            d = _max_abs(a, b)
            self.differ(f"{key}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}, max |diff| {d:.3g}", d)

    def documents(self, a: object, b: object, where: str = "") -> None:
        """Two JSON documents key by key (nested keys joined by dots)."""
        fa, fb = _flatten(a), _flatten(b)
        for k in sorted(set(fa) | set(fb)):
            if k not in fa or k not in fb:
                self.differ(f"{where}key {k}: only in {'a' if k in fa else 'b'}")
            elif fa[k] != fb[k]:
                if VOLATILE_JSON_KEYS.search(k):
                    self.ignored.add(where + re.sub(r"^cases\.[^.]+\.", "cases.*.", re.sub(r"\.\d+\.", ".N.", k)))
                else:
                    self.differ(f"{where}key {k}: {_contrast(fa[k], fb[k])}")

    def attributes(self, where: str, a: dict, b: dict) -> None:
        for k in sorted(set(a) | set(b)):
            if k in ("DIMENSION_LIST", "REFERENCE_LIST"):  # HDF5 object references, not values
                continue
            if k not in a or k not in b:
                self.differ(f"{where}attr {k}: only in {'a' if k in a else 'b'}")
                continue
            va, vb = self._attr(a[k], self.ca), self._attr(b[k], self.cb)
            if not _equal(va, vb):
                if VOLATILE_NC.match(k):
                    self.ignored.add(f"{where}attr {k}")
                else:
                    self.differ(f"{where}attr {k}: {_contrast(va, vb)}")

    @staticmethod
    def _attr(value: object, clean: Clean) -> object:
        if isinstance(value, bytes):
            value = value.decode(errors="replace")
        return clean(value) if isinstance(value, str) else value

    def npz(self) -> None:
        """Every array; a JSON string (a checkpoint's header) key by key, as metadata.json."""
        with np.load(self.a, allow_pickle=False) as fa, np.load(self.b, allow_pickle=False) as fb:
            for k in sorted(set(fa.files) | set(fb.files)):
                xa, xb = (fa[k] if k in fa.files else None), (fb[k] if k in fb.files else None)
                ja = self._json_string(xa, self.ca)
                jb = self._json_string(xb, self.cb)
                if ja is not None and jb is not None:
                    self.documents(ja, jb, f"{k}: ")
                else:
                    self.arrays(k, xa, xb)

    @staticmethod
    def _json_string(x: np.ndarray | None, clean: Clean) -> object | None:
        """The document a 0-d string array holds as JSON (a checkpoint's header), else None."""
        if x is None or x.ndim != 0 or x.dtype.kind != "U":
            return None
        try:
            return json.loads(clean(str(x)))
        except ValueError:
            return None

    def hdf5(self) -> None:
        """run.nc and other HDF5 files: every group's and dataset's attributes, every dataset's values."""
        import h5py

        with h5py.File(self.a, "r") as fa, h5py.File(self.b, "r") as fb:
            self.attributes("", dict(fa.attrs), dict(fb.attrs))
            items_a: dict = {}
            items_b: dict = {}
            fa.visititems(lambda n, o: items_a.__setitem__(n, o))
            fb.visititems(lambda n, o: items_b.__setitem__(n, o))
            for name in sorted(set(items_a) | set(items_b)):
                oa, ob = items_a.get(name), items_b.get(name)
                if oa is None or ob is None:
                    self.differ(f"{name}: only in {'a' if ob is None else 'b'}")
                    continue
                self.attributes(f"{name}: ", dict(oa.attrs), dict(ob.attrs))
                if isinstance(oa, h5py.Dataset) and isinstance(ob, h5py.Dataset):
                    xa, xb = oa[()], ob[()]
                    if VOLATILE_NC.match(name) and not _equal(xa, xb):
                        self.ignored.add(name)
                    else:
                        self.arrays(name, xa, xb)

    def csv(self) -> None:
        """Every column: numbers exactly (else the largest difference), text after the paths' masking."""
        import pandas as pd

        da, db = pd.read_csv(self.a), pd.read_csv(self.b)
        for c in sorted(set(da.columns) ^ set(db.columns)):
            self.differ(f"column {c}: only in {'a' if c in da else 'b'}")
        if len(da) != len(db):
            self.differ(f"rows {len(da)} vs {len(db)}")
            return
        for c in da.columns:
            if c not in db.columns:
                continue
            xa, xb = da[c].to_numpy(), db[c].to_numpy()
            if xa.dtype.kind == "O" or xb.dtype.kind == "O":
                xa = np.array([self.ca(str(v)) for v in xa])
                xb = np.array([self.cb(str(v)) for v in xb])
            if c in VOLATILE_CSV_COLUMNS and not _equal(xa, xb):
                self.ignored.add(f"column {c}")
            else:
                self.arrays(f"column {c}", xa, xb)

    def json(self) -> None:
        """metadata.json, study.json, cases.json: every key but the volatile ones."""
        self.documents(json.loads(self.ca(self.a.read_text())), json.loads(self.cb(self.b.read_text())))

    def png(self) -> None:
        """Pictures by their pixels (matplotlib writes its version into the file)."""
        from PIL import Image

        pa = np.asarray(Image.open(self.a).convert("RGBA"))
        pb = np.asarray(Image.open(self.b).convert("RGBA"))
        if pa.shape != pb.shape:
            self.differ(f"size {pa.shape} vs {pb.shape}")
            return
        n = int(np.count_nonzero(np.any(pa != pb, axis=-1)))
        if n:
            self.differ(f"{n} of {pa.shape[0] * pa.shape[1]} pixels differ")
        else:
            self.ignored.add("PNG metadata")

    def text(self) -> None:
        """Line by line, paths, times and measured costs masked."""
        ra, rb = self.ca(self.a.read_text(errors="replace")), self.cb(self.b.read_text(errors="replace"))
        if ra == rb:
            self.ignored.add("paths")
            return
        la, lb = mask_text(ra), mask_text(rb)
        if la == lb:
            self.ignored.add("measured times in text")
            return
        diff = [d for d in difflib.unified_diff(la, lb, lineterm="", n=0)
                if d[:1] in "+-" and d[:3] not in ("+++", "---")]
        self.differ(f"{len(diff)} lines differ after masking measured times")
        self.notes += [d[:160] for d in diff[:6]]

    def bytes(self) -> None:
        self.differ("bytes differ")


READERS = {".npz": Pair.npz, ".nc": Pair.hdf5, ".h5": Pair.hdf5, ".csv": Pair.csv, ".json": Pair.json,
           ".png": Pair.png, ".gif": Pair.bytes, ".mp4": Pair.bytes, ".pdf": Pair.bytes, ".msh": Pair.bytes}


def compare_file(rel: str, a: Path, b: Path, ca: Clean, cb: Clean) -> Result:
    if a.read_bytes() == b.read_bytes():
        return Result(rel, "identical")
    pair = Pair(a, b, ca, cb)
    try:
        READERS.get(a.suffix, Pair.text)(pair)
    except Exception as exc:  # a file one side cannot read is a difference, not a crash
        return Result(rel, "differ", f"unreadable: {type(exc).__name__}: {exc}", math.inf)
    if not pair.notes:
        return Result(rel, "equal", "left out: " + ", ".join(sorted(pair.ignored)))
    return Result(rel, "differ", "; ".join(pair.notes), pair.worst)


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name not in SKIP}


def compare_roots(a: Path, b: Path, show_all: bool) -> int:
    """Print the comparison of two output roots; 1 when a file differs or is missing on one side."""
    ca, cb = side_cleaner(a), side_cleaner(b)
    fa, fb = files_under(a), files_under(b)
    results = []
    for rel in sorted(fa | fb):
        if rel not in fb:
            results.append(Result(rel, "only-a"))
        elif rel not in fa:
            results.append(Result(rel, "only-b"))
        else:
            results.append(compare_file(rel, a / rel, b / rel, ca, cb))
    counts = {s: sum(r.status == s for r in results) for s in ("identical", "equal", "differ", "only-a", "only-b")}
    print(f"a = {a}\nb = {b}")
    print(f"files compared: {len(results)}; byte-identical {counts['identical']}, equal but for volatile fields "
          f"{counts['equal']}, differing {counts['differ']}, only in a {counts['only-a']}, "
          f"only in b {counts['only-b']}")
    left_out: dict[str, int] = {}
    for r in results:
        if r.status == "equal":
            for item in r.detail.removeprefix("left out: ").split(", "):
                left_out[item] = left_out.get(item, 0) + 1
    print("left out as volatile (files): " + "; ".join(f"{k} ({n})" for k, n in sorted(left_out.items())) + "\n")
    shown = [r for r in results if show_all or r.status not in ("identical", "equal")]
    if shown:
        width = max(len(r.path) for r in shown)
        print(f"{'file':{width}s}  {'status':9s}  {'max|diff|':>9s}  detail")
        for r in shown:
            diff = "" if r.status != "differ" else ("-" if math.isinf(r.max_diff) else f"{r.max_diff:.3g}")
            print(f"{r.path:{width}s}  {r.status:9s}  {diff:>9s}  {r.detail[:600]}")
    return 1 if counts["differ"] or counts["only-a"] or counts["only-b"] else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("run", help="run the cases with a code tree")
    p.add_argument("tree", type=Path, help="directory with the meanfield package and runs/examples")
    p.add_argument("out", type=Path, help="output root")
    p.add_argument("--only", nargs="+", default=[], help="these cases only (names from `cases`)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per case")
    p = sub.add_parser("compare", help="compare two output roots file by file")
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    p.add_argument("--all", action="store_true", help="list the identical files too")
    sub.add_parser("cases", help="list the cases")
    args = parser.parse_args()
    if args.mode == "run":
        return run_cases(args.tree, args.out, args.only, args.timeout)
    if args.mode == "compare":
        return compare_roots(args.a, args.b, args.all)
    examples = sorted(p.stem for p in (Path(__file__).parents[1] / "runs" / "examples").glob("*.toml"))
    for case in all_cases(examples):
        launch = f"mpirun -n {case.ranks} " if case.ranks > 1 else ""
        print(f"{case.name:28s} {launch}meanfield {' '.join(case.argv)}" + (f"   [{case.note}]" if case.note else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
