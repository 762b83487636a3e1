"""Write a collection the relational study has not seen, in the on-disk study format, to check
that ``experiments/relational.py --collection dir`` runs unchanged on it.

The HetRec MovieLens users that ``relational.py --collection MovieLens`` does *not* choose (same
seed and eligibility rule), ``--movies`` of each user's rated movies, co-director and co-country
relations, star ratings as grades: ``bayesrank.data.study`` format under ``--out``.

    python experiments/kept_aside.py [--data-dir ../shared/data] [--users 4] [--movies 60]
        [--out experiments/out/kept_aside_data]
    python experiments/relational.py --collection dir --data-dir experiments/out/kept_aside_data
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bayesrank.data.study import StudyQuery, write_study_dir
from bayesrank.experiments.relational import StudyConfig
from bayesrank.experiments.relational.collections import movielens

REPO_ROOT = Path(__file__).resolve().parents[1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--data-dir", type=Path, default=REPO_ROOT / ".." / "shared" / "data")
    p.add_argument("--users", type=int, default=4)
    p.add_argument("--movies", type=int, default=60)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=REPO_ROOT / "experiments/out/kept_aside_data")
    args = p.parse_args()
    study = StudyConfig("MovieLens", args.data_dir, queries=10, seed=args.seed, max_movies=100)
    used = {q.qid for q in movielens(study)}
    every = StudyConfig(
        "MovieLens", args.data_dir, queries=10_000, seed=args.seed, max_movies=args.movies
    )
    rest = [q for q in movielens(every) if q.qid not in used][: args.users]
    keep = ("co_director", "co_country")
    out = [
        StudyQuery(q.qid, q.X, q.pairs, {r: q.relations[r] for r in keep}, q.grades) for q in rest
    ]
    write_study_dir(args.out, out)
    print(f"{len(out)} users ({[q.qid for q in out]}), n = {[q.n for q in out]}: {args.out}")
    print(
        f"pairs: {[len(q.pairs) for q in out]}; held out from the MovieLens study: {sorted(used)}"
    )


if __name__ == "__main__":
    main()
