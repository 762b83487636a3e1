"""``bayesrank experiment large``: XPGP on every HetRec MovieLens movie as one problem, without a
dense matrix, against choix, the dense engine and a model of the attributes alone.

Protocol: the 10,197 movies of HetRec 2011 MovieLens-2k, their 27 attributes (``[0, 1]``
scaled) and two membership relations (co-director and co-genre, each the hypergraph
Laplacian of its groups: ``membership_precision(normalize=True)``); the pairs are every user's
ratings pooled (``data.movielens.pooled_pairs``: 2,308,022 from the 38 users whose ratings are
public, over the 3,260 movies they rated), shuffled with ``--seed``; the first ``--n-train`` are
the training pairs, the next ``--n-test`` the held-out pairs (different users may judge the same
two movies; held-out pairs are new judgements, not new movie pairs).

Models: ``XPGP`` (an RBF kernel on the attributes, ``kappa = 1``, ``rho`` by the median
heuristic, at rank ``--rank`` by pivoted Cholesky with the residual variances as a diagonal
block; an entity effect of variance 0.5; the two relations, ``beta = iota = 1``, weight 1) and
``attributes`` (the same without the relations), both by ``inference.sparse``: the Laplace
mode, every held-out pair's variance from ``--samples`` posterior draws, and the evidence
(stochastic Lanczos, ``--probes`` probes); each also with its terms' variances learned
(``learning.sparse_em``, at most ``--em-steps`` steps, 16 draws: ``, EM`` EM's fixed point,
``, evidence`` the Laplace evidence's stationary point; the lengthscale stays the median
heuristic's); ``choix``
(Bradley-Terry by ``ilsr_pairwise``, ``alpha = 0.01``; a point estimate, no attributes, where
choix is installed: the ``bench`` extra). Reported for each: the held-out pair error (a
probability of exactly 1/2 counts half), the mean log-likelihood of the held-out outcomes, the
expected calibration error (10 bins, each pair in a random orientation), and the seconds.

Dense subsets (``--dense-sizes``): the ``n`` movies rated most often, the pairs among them; the
sparse XPGP at ``--rank`` against the dense Laplace engine on the exact prior (the full RBF Gram
matrix plus the relations' covariances, inverted densely): the held-out error of each, on at
most ``--dense-pairs`` training pairs among those movies (the dense engine's memory grows as
``m n``) and a quarter as many held-out pairs.

Presets (``--protocol``): ``reduced`` (the default; about a minute) 20,000 training and 5,000
held-out pairs, rank 64, a dense subset of 1,000; ``full`` 10^6 and 10^5, rank 128, subsets of
2,000 and 5,000. ``--data-dir`` is the folder that holds ``hetrec2011-movielens-2k`` (required:
nothing of HetRec is bundled).
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import time

import numpy as np

from ..data.study import DEFAULT_KEEP
from ._common import Progress, check_positive, held_out_value, median_rho, write_outputs
from .protocol import Protocol, add_protocol_argument, from_args, preset_of

__all__ = ["HELP", "NAME", "PRESETS", "LargeProtocol", "add_arguments", "run"]

NAME = "large"
HELP = "XPGP on all 10,197 HetRec movies without a dense matrix, against choix and dense"
#: ``--data-dir``'s help: HetRec is not bundled, so there is no default.
DATA_DIR = "the folder that holds hetrec2011-movielens-2k (required: HetRec is not bundled)"
#: The experiment writes its results and table, no figure.
FIGURE = False


@dataclasses.dataclass(frozen=True)
class LargeProtocol(Protocol):
    """The settings ``--protocol`` presets (module docstring)."""

    n_train: int = 20_000
    n_test: int = 5_000
    rank: int = 64
    dense_sizes: tuple[int, ...] = (1000,)
    em_steps: int = 15


#: The presets (``experiments.protocol``); an option given overrides its value.
PRESETS = {
    "reduced": LargeProtocol(),
    "full": LargeProtocol(n_train=1_000_000, n_test=100_000, rank=128, dense_sizes=(2000, 5000)),
}
RELATIONS = ("co_director", "co_genre")
#: The CG tolerance of the held-out predictions' draws. Measured on the full protocol
#: (``benchmarks/bench_large_predict.py --cg-tols``): against 1e-6, the 10^5 pair variances
#: move by at most 0.0014 of their Monte Carlo standard error (median 6e-5), the error and
#: log-likelihood agree to 7 digits, and the compiled predictions take 30.6 s instead of 60.4 s.
DRAWS_CG_TOL = 1e-4
ENTITY_VARIANCE = 0.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_protocol_argument(
        parser, PRESETS, help="reduced (default: 20,000 pairs) or full (10^6 pairs)"
    )
    parser.add_argument("--n-train", type=int, default=None, help="training pairs")
    parser.add_argument("--n-test", type=int, default=None, help="held-out pairs")
    parser.add_argument("--rank", type=int, default=None, help="rank of the attribute kernel")
    parser.add_argument("--samples", type=int, default=64, help="posterior draws for variances")
    parser.add_argument("--probes", type=int, default=64, help="the evidence's Lanczos probes")
    parser.add_argument("--dense-sizes", type=int, nargs="*", default=None,
                        help="movies in each dense-engine subset (none: skip)")  # fmt: skip
    parser.add_argument(
        "--dense-pairs",
        type=int,
        default=20_000,
        help="training pairs in a dense subset, at most (memory: O(m n))",
    )
    parser.add_argument(
        "--split",
        choices=("pairs", "entities"),
        default="pairs",
        help="pairs (the default: the first --n-train of the shuffled pairs train, the next "
        "--n-test are held out) or entities (--held-out movies held out, each keeping --keep "
        "of its judgements; bayesrank.experiments.large_entities)",
    )
    parser.add_argument(
        "--keep",
        type=int,
        nargs="+",
        default=list(DEFAULT_KEEP),
        help="--split entities: the judgements each held-out movie keeps, one setting each "
        f"(default {' '.join(map(str, DEFAULT_KEEP))}; 0 is the cold start)",
    )
    parser.add_argument(
        "--held-out",
        type=held_out_value,
        default=300,
        help="--split entities: the number (default 300) or share of the rated movies held out",
    )
    parser.add_argument(
        "--learn",
        action="store_true",
        help="--split entities: learn each GP model's scales and lengthscale from its sparse "
        "Laplace evidence on the smallest --keep's training pairs, then fit every --keep at them",
    )
    parser.add_argument(
        "--em-steps",
        type=int,
        default=None,
        help="EM steps for the learned models (0: no learning)",
    )


def load(data_dir):
    """``(movie_ids, X: (n, 27) scaled, pairs: (m, 2), memberships: {relation: (entities,
    groups)})`` of HetRec's movies (module docstring)."""
    from ..data.graphs.hetrec import read_hetrec_memberships
    from ..data.movielens import movie_attributes, pooled_pairs, scale01, user_ratings

    if data_dir is None:
        raise ValueError("--data-dir: give the folder that holds hetrec2011-movielens-2k")
    attrs = movie_attributes(data_dir)
    ids = sorted(attrs)
    X = scale01(np.stack([attrs[m] for m in ids]))
    pairs, _ = pooled_pairs(user_ratings(data_dir), ids)
    index = {m: a for a, m in enumerate(ids)}
    base = f"{data_dir}/hetrec2011-movielens-2k"
    memberships = {}
    for relation in RELATIONS:
        rows = [(index[m], g) for m, g in read_hetrec_memberships(base, relation) if m in index]
        memberships[relation] = (np.array([a for a, _ in rows]), np.array([g for _, g in rows]))
    return ids, X, pairs, memberships


def _prior(X, memberships, rank, relations: bool, entity: float | None = None):
    """The sparse prior (module docstring), the entity effect's variance ``entity`` (default
    ``ENTITY_VARIANCE``); with it the attributes' residual trace."""
    import jax.numpy as jnp

    from ..inference import sparse as S
    from ..kernels import RBF
    from ..kernels.lowrank import pivoted_cholesky

    kernel = RBF(1.0, median_rho(X))
    low = pivoted_cholesky(kernel, jnp.asarray(X), rank)
    variance = ENTITY_VARIANCE if entity is None else entity
    blocks = [S.diagonal_precision(np.asarray(low.residual) + variance)]
    if relations:
        n = len(X)
        blocks += [S.membership_precision(e, g, n, normalize=True) for e, g in memberships.values()]
    return S.latent_prior(low.features, blocks), float(np.sum(low.residual))


def _scores(prob, seed):
    """Error, mean log-likelihood and calibration of ``prob: (p,)``, each the probability that
    a held-out pair's winner wins."""
    from ..metrics.calibration import expected_calibration_error

    prob = np.clip(np.asarray(prob, float), 1e-300, 1.0)
    flip = np.random.default_rng(seed).random(len(prob)) < 0.5
    return {
        "error": float(np.mean((prob < 0.5) + 0.5 * (prob == 0.5))),
        "log_likelihood": float(np.mean(np.log(prob))),
        "ece": float(expected_calibration_error(np.where(flip, 1 - prob, prob), ~flip)),
    }


def _sparse(prior, train, test, samples, seed, probes=64):
    import jax

    from ..inference import sparse as S

    t = time.perf_counter()
    fit = jax.block_until_ready(S.mode(prior, train))
    fit_s = time.perf_counter() - t
    t = time.perf_counter()
    key = jax.random.key(seed)
    predictions = S.sampled_pair_predictions(
        prior, train, fit, test, key, n_samples=samples, cg_tol=DRAWS_CG_TOL
    )
    prob, _, var, se = jax.block_until_ready(predictions)
    row = {
        "fit_s": fit_s,
        "predict_s": time.perf_counter() - t,
        "newton_iterations": int(fit.n_iter),
        "converged": bool(fit.converged),
        "cg_iterations": int(fit.cg_iterations),
        "variance_relative_se": float(np.median(np.asarray(se / var))),
        **_scores(prob, seed),
    }
    if probes:
        t = time.perf_counter()
        ev = jax.block_until_ready(S.log_evidence(prior, train, fit, key, n_probes=probes))
        row.update(log_evidence=float(ev.log_z), log_evidence_se=float(ev.se),
                   evidence_s=time.perf_counter() - t)  # fmt: skip
    return row


def _learned(prior, train, test, samples, seed, steps, probes, objective="em"):
    """The terms' variances learned (``learning.sparse_em``: EM's fixed point, or the Laplace
    evidence's stationary point), then the model at them."""
    import jax

    from ..learning.sparse_em import em_variances

    t = time.perf_counter()
    em = em_variances(prior, train, jax.random.key(seed), max_iter=steps, objective=objective)
    seconds = time.perf_counter() - t
    row = _sparse(em.prior, train, test, samples, seed, probes)
    row.update(em_s=seconds, em_converged=bool(em.converged), em_cycles=len(em.trace) - 1)
    return row, [float(v) for v in em.variances]


def _choix(n, train, test, seed):
    try:
        import choix
    except ImportError:
        return None
    t = time.perf_counter()
    theta = choix.ilsr_pairwise(n, [tuple(p) for p in train.tolist()], alpha=0.01)
    seconds = time.perf_counter() - t
    prob = 1.0 / (1.0 + np.exp(-(theta[test[:, 0]] - theta[test[:, 1]])))
    return {"fit_s": seconds, **_scores(prob, seed)}


def _dense_subset(X, memberships, train, test, counts, size, rank, seed, max_pairs):
    """The sparse engine at ``rank`` and the dense engine on the exact prior, on the ``size``
    movies rated most often."""
    import jax

    from ..inference import ep, laplace
    from ..inference import sparse as S
    from ..kernels import RBF

    keep = np.sort(np.argsort(-counts, kind="stable")[:size])
    new = np.full(len(X), -1)
    new[keep] = np.arange(size)

    def restrict(pairs):
        p = new[pairs]
        return p[(p >= 0).all(1)]

    tr, te = restrict(train)[:max_pairs], restrict(test)[: max(1, max_pairs // 4)]
    sub = {}
    for name, (e, g) in memberships.items():
        inside = new[e] >= 0
        sub[name] = (new[e][inside], g[inside])
    Xs = X[keep]
    prior, _ = _prior(Xs, sub, rank, relations=True)
    row = {"n": int(size), "train_pairs": len(tr), "test_pairs": len(te)}
    row["sparse"] = _sparse(prior, tr, te, 256, seed, probes=0)
    K = np.asarray(RBF(1.0, median_rho(Xs))(Xs)) + ENTITY_VARIANCE * np.eye(size)
    for e, g in sub.values():
        K += np.linalg.inv(S.membership_precision(e, g, size, normalize=True).dense())
    t = time.perf_counter()
    post = jax.block_until_ready(laplace.fit(K, tr))
    prob = post.predict_pairs(te).prob
    row["dense"] = {"fit_s": time.perf_counter() - t, **_scores(prob, seed)}
    # EP on the same prior and pairs: the measurement behind a Laplace-only sparse engine.
    t = time.perf_counter()
    post = jax.block_until_ready(ep.fit(K, tr))
    prob = post.predict_pairs(te).prob
    row["dense_ep"] = {"fit_s": time.perf_counter() - t, "sweeps": int(post.n_iter),
                       "converged": bool(post.converged), **_scores(prob, seed)}  # fmt: skip
    return row


def run(args: argparse.Namespace) -> dict:
    """The global fits, choix and the dense subsets (module docstring)."""
    protocol, _ = preset_of(args, PRESETS)
    p = from_args(args, PRESETS)
    n_train = check_positive(p.n_train, "--n-train")
    n_test = check_positive(p.n_test, "--n-test")
    rank = check_positive(p.rank, "--rank")
    samples = check_positive(args.samples, "--samples", low=2)
    probes = check_positive(args.probes, "--probes", low=2)
    sizes = p.dense_sizes
    dense_pairs = check_positive(args.dense_pairs, "--dense-pairs")
    em_steps = check_positive(p.em_steps, "--em-steps", low=0)
    start = time.perf_counter()
    progress = Progress(5 + len(sizes) + 4 * bool(em_steps))
    ids, X, pairs, memberships = load(args.data_dir)
    if n_train + n_test > len(pairs):
        raise ValueError(
            f"--n-train + --n-test = {n_train + n_test} exceeds the {len(pairs)} pooled pairs"
        )
    if getattr(args, "split", "pairs") == "entities":
        from .large_entities import run_entities

        return run_entities(args, start, ids, X, pairs, memberships, n_train, n_test, rank,
                            samples, probes, protocol)  # fmt: skip
    order = np.random.default_rng(args.seed).permutation(len(pairs))
    train, test = pairs[order[:n_train]], pairs[order[n_train : n_train + n_test]]
    progress(f"data: {len(ids)} movies, {len(pairs)} pooled pairs")
    rows, learned = {}, {}

    def learn(model, prior):
        """The model's rows with its variances learned by each objective."""
        for objective, label in (("em", "EM"), ("evidence", "evidence"))[: 2 * bool(em_steps)]:
            name = f"{model}, {label}"
            rows[name], learned[name] = _learned(prior, train, test, samples, args.seed,
                                                 em_steps, probes, objective)  # fmt: skip
            progress(name)

    prior, residual = _prior(X, memberships, rank, relations=True)
    rows["XPGP"] = _sparse(prior, train, test, samples, args.seed, probes)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    progress("XPGP")
    learn("XPGP", prior)
    prior, _ = _prior(X, memberships, rank, relations=False)
    rows["attributes"] = _sparse(prior, train, test, samples, args.seed, probes)
    progress("attributes")
    learn("attributes", prior)
    rows["choix"] = _choix(len(ids), train, test, args.seed)
    progress("choix" if rows["choix"] else "choix: not installed (the bench extra)")
    counts = np.bincount(train.ravel(), minlength=len(ids))
    subsets = []
    for size in sizes:
        subsets.append(_dense_subset(X, memberships, train, test, counts, size, rank, args.seed,
                                     dense_pairs))  # fmt: skip
        progress(f"dense subset of {size}")
    results = {
        "settings": {"protocol": protocol, "n_movies": len(ids), "pooled_pairs": len(pairs),
                     "n_train": n_train, "n_test": n_test, "rank": rank, "samples": samples,
                     "probes": probes, "dense_sizes": list(sizes), "seed": int(args.seed),
                     "rated_movies": int(np.count_nonzero(np.bincount(pairs.ravel())))},
        "attribute_residual_trace": residual,
        "xpgp_peak_rss_mb": peak_mb,
        "models": rows,
        "learned_variances": learned,
        "subsets": subsets,
        "seconds": time.perf_counter() - start,
    }  # fmt: skip
    text = table(results)
    print(text)
    progress("done")
    if args.out is not None:
        write_outputs(results, args.out, text, None, NAME)
    return results


def table(results) -> str:
    """One line per model and per dense subset."""
    s = results["settings"]
    lines = [
        f"{s['n_movies']} movies, {s['n_train']} training and {s['n_test']} held-out pairs "
        f"(of {s['pooled_pairs']} pooled), attribute rank {s['rank']}",
        f"{'model':15}  {'error':>6}  {'loglik':>7}  {'ECE':>6}  {'fit s':>6}  {'pred s':>6}  "
        f"{'log Z':>12}",
    ]
    for name, r in results["models"].items():
        if r is None:
            lines.append(f"{name:15}  not installed")
            continue
        ev = (f"{r['log_evidence']:.1f} ± {r['log_evidence_se']:.1f}"
              if "log_evidence" in r else "")  # fmt: skip
        lines.append(
            f"{name:15}  {r['error']:6.4f}  {r['log_likelihood']:7.4f}  {r['ece']:6.4f}  "
            f"{r['fit_s']:6.1f}  {r.get('predict_s', float('nan')):6.1f}  {ev:>12}"
        )
    lines.append(f"XPGP's process peak memory so far: {results['xpgp_peak_rss_mb']:.0f} MB")
    for sub in results["subsets"]:
        lines.append(f"subset n={sub['n']} ({sub['train_pairs']} / {sub['test_pairs']} pairs):")
        for label, key in (("sparse Laplace", "sparse"), ("dense Laplace", "dense"),
                           ("dense EP", "dense_ep")):  # fmt: skip
            r = sub[key]
            lines.append(
                f"  {label:15}  {r['error']:6.4f}  {r['log_likelihood']:7.4f}  {r['ece']:6.4f}  "
                f"{r['fit_s']:6.1f}"
            )
    return "\n".join(lines)
