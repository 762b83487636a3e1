"""Sizes and degree statistics of the relation graphs built from the benchmark data.

Builds the OHSUMED keyword graphs (cosine similarity of query-term frequencies, title + abstract)
of a few queries, complete and 10-NN sparsified, and the HetRec MovieLens-2k co-director,
co-genre, co-country and shared-tag graphs over the movies rated in ``ratings_subset_38users``,
then prints one line of statistics per graph.

Usage::

    python experiments/relation_graphs.py [--data-dir ../shared/data] [--qids 1 2 3 4 5]
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import networkx as nx
import numpy as np

from bayesrank.data.graphs import load_hetrec_relations, ohsumed_keyword_graph, to_networkx

REPO_ROOT = Path(__file__).resolve().parents[1]
HEADER = (
    f"{'graph':<22} {'n':>5} {'edges':>9} {'density':>7} {'isol':>5} {'comps':>5}  "
    f"{'degree min/mean/max':>20}  {'weighted degree min/mean/max':>30}"
)


def graph_stats(name: str, W: np.ndarray) -> str:
    """One line: n, edges, density, isolated nodes, components, (weighted) degree range."""
    n = W.shape[0]
    edges = int(np.count_nonzero(np.triu(W, k=1)))
    degree = np.count_nonzero(W, axis=1)
    strength = W.sum(axis=1)
    density = edges / (n * (n - 1) / 2) if n > 1 else 0.0
    components = nx.number_connected_components(to_networkx(W))
    return (
        f"{name:<22} {n:>5} {edges:>9} {density:>7.4f} {int((degree == 0).sum()):>5} "
        f"{components:>5}  {degree.min():>6} {degree.mean():>7.1f} {degree.max():>5}  "
        f"{strength.min():>9.2f} {strength.mean():>10.2f} {strength.max():>9.2f}"
    )


def rated_movies(hetrec_dir: Path) -> list[int]:
    """Distinct movie ids of the 38-user ratings subset (train and test), ascending."""
    movies: set[int] = set()
    for part in ("train", "test"):
        path = hetrec_dir / "ratings_subset_38users" / f"{part}_user_ratings.dat.gz"
        lines = gzip.decompress(path.read_bytes()).decode("latin-1").splitlines()
        movies.update(int(line.split("\t")[1]) for line in lines[1:] if line.strip())
    return sorted(movies)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=REPO_ROOT / ".." / "shared" / "data")
    parser.add_argument("--qids", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--k", type=int, default=10, help="neighbours of the sparsified graphs")
    args = parser.parse_args(argv)
    data_dir = args.data_dir.resolve()

    print(f"data: {data_dir}")
    print(HEADER)
    for qid in args.qids:
        meta = data_dir / "OHSUMED" / "Meta" / f"query-{qid}.xml.gz"
        W, _ = ohsumed_keyword_graph(meta)
        print(graph_stats(f"ohsumed q{qid} keyword", W))
        W, _ = ohsumed_keyword_graph(meta, k=args.k)
        print(graph_stats(f"ohsumed q{qid} kw {args.k}-NN", W))

    hetrec_dir = data_dir / "hetrec2011-movielens-2k"
    movies = rated_movies(hetrec_dir)
    print(f"\nHetRec: {len(movies)} movies rated in ratings_subset_38users")
    print(HEADER)
    for name, W in load_hetrec_relations(hetrec_dir, movies).items():
        print(graph_stats(f"hetrec {name}", W))


if __name__ == "__main__":
    main()
