"""Time the LETOR reader on OHSUMED ALL (16,140 lines, 45 dense features).

    python benchmarks/bench_letor_reader.py [DATA_DIR]     # DATA_DIR defaults to ../shared/data

Peers, side by side in the same run: a plain-Python line-by-line parser (what users write by hand)
and, where installed (``pip install -e .[bench]``), scikit-learn's ``load_svmlight_file`` (Cython).
Reports the best of several runs and the ratios to bayesrank.
"""

from __future__ import annotations

import gzip
import sys
import tempfile
from pathlib import Path

import _harness as harness

from bayesrank.data.letor import load_letor


def plain_python(path):
    rows = []
    with gzip.open(path, "rt") as f:
        for line in f:
            body = line.partition("#")[0].split()
            feats = dict(tok.split(":") for tok in body[2:])
            rows.append((int(body[0]), body[1][4:], [float(v) for v in feats.values()]))
    return rows


def best_of(fn, repeats=5):
    return min(harness.repeat(fn, repeats)[0])


def main(data_dir: Path) -> None:
    path = data_dir / "OHSUMED/Feature-min/ALL/OHSUMED.txt.gz"
    queries = load_letor(path)
    print(f"file: {path} ({sum(q.n_docs for q in queries)} lines, {len(queries)} queries)")
    results = {"bayesrank.load_letor (gz)": best_of(lambda: load_letor(path))}
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "OHSUMED.txt"
        plain.write_bytes(gzip.decompress(path.read_bytes()))
        results["bayesrank.load_letor (plain)"] = best_of(lambda: load_letor(plain))
        results["plain Python parser (gz)"] = best_of(lambda: plain_python(path))
        try:
            from sklearn.datasets import load_svmlight_file

            results["sklearn load_svmlight_file (plain)"] = best_of(
                lambda: load_svmlight_file(str(plain), query_id=True)
            )
        except ImportError:
            print("scikit-learn not installed: skipping its reader (pip install -e .[bench])")
    ours = results["bayesrank.load_letor (gz)"]
    for name, seconds in results.items():
        print(
            f"{name:40s} {seconds * 1e3:8.1f} ms   ratio to bayesrank (gz): {seconds / ours:5.2f}"
        )


if __name__ == "__main__":
    main(
        Path(sys.argv[1])
        if len(sys.argv) > 1
        else Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
    )
