"""How far is EP from NUTS? The same XPGP model, fixed hyperparameters, two inference engines.

For each problem, EP (``inference.ep.fit``, parallel schedule, ``tol=1e-8``) and NUTS
(``inference.nuts.sample_batch``: all problems of a setting in one compiled call) are run on the
same prior covariance ``K`` and known pairs, and compared on

* held-out pair probabilities: EP's ``Phi(dmu / sqrt(1 + dvar))`` against NUTS's Monte Carlo
  ``mean_t Phi(xi_i - xi_j)`` (the same quantity; ``mean |dp|`` and ``max |dp|`` over the pairs);
* posterior means and standard deviations of the latent degrees (``mean``/``max`` absolute
  differences over the real entities; ``sd`` = the typical NUTS posterior sd, for scale);
* held-out pair accuracy (``1 - ERR``: a pair counts when its predicted probability is > 1/2)
  of each engine;
* NUTS's own noise floor: the median Monte Carlo standard error of a pair probability (from
  NumPyro's ESS, over up to 500 held-out pairs per query), the worst split R-hat, the smallest
  ESS and the divergences.

Problems:

* **OHSUMED**: random queries (seed 0, as ``learn_ohsumed.py``: a query needs ``known + 100``
  grade-implied pairs), ``--known`` pairs known, the rest held out; the XPGP prior of
  ``docs/development/learning.md`` fixed at its EM fit with 200 known pairs: RBF (``kappa = 1``,
  ``rho = 0.57``) on the 45 QueryLevelNorm features + regularized Laplacian (``iota = 1.68``) on
  the keyword graph (10-NN), weights ``(1.63, 2.74)``, per-document effect ``s = 0.11``.
* **synthetic**: ``n = 50`` entities, ``X ~ N(0, I_3)``, ``K = kappa^2 RBF(rho = 1/sqrt(3))
  + 0.01 I``; a latent ``xi ~ N(0, K)``; ``m`` known pairs of distinct random entities labelled
  by the probit model (``P(i > j) = Phi(xi_i - xi_j)``); 500 held-out pairs labelled by the sign
  of ``xi_i - xi_j``. Settings: ``m in {20, 100, 400}`` x ``kappa in {1, 3}``, 4 problems each.

Usage::

    python experiments/ep_vs_nuts.py [--data-dir ../shared/data] [--queries 10] [--known 100 200]
        [--warmup 1000] [--samples 1000] [--chains 4] [--seed 0] [--skip-synthetic]
        [--skip-ohsumed] [--out experiments/out/ep_vs_nuts]

Prints a Markdown table (the one in ``docs/results/ep-vs-nuts.md``), writes ``results.json``
and, with matplotlib, ``ep_vs_nuts.png`` (EP against NUTS pair probabilities, one panel per
setting).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
from bayesrank.runtime import enable_compilation_cache, pin_to_one_cpu  # noqa: E402

pin_to_one_cpu()  # before the first computation (runtime.pin_to_one_cpu; --all-cpus: not)

enable_compilation_cache()  # compiled programs kept on disk between runs

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from bayesrank.data.batch import stack_problems  # noqa: E402
from bayesrank.data.problem import PreferenceProblem  # noqa: E402
from bayesrank.inference import ep, nuts  # noqa: E402
from bayesrank.kernels import RBF, XPGP, Independent, RegularizedLaplacian  # noqa: E402
from bayesrank.parallel import covariances, prepare_batch  # noqa: E402
from bayesrank.predict import predict_pairs  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: The EM fit of docs/development/learning.md (200 known pairs, shared theta, XPGP with the
#: keyword graph).
OHSUMED_PRIOR = dict(rho=0.57, iota=1.68, weights=(1.63, 2.74), entity=0.11)


def ohsumed_prior() -> XPGP:
    p = OHSUMED_PRIOR
    return XPGP(
        RBF(jnp.asarray(1.0), jnp.asarray(p["rho"])),
        (RegularizedLaplacian(iota=jnp.asarray(p["iota"])),),
        jnp.asarray(p["weights"]),
        entity=Independent(jnp.asarray(p["entity"])),
    )


def ohsumed_settings(data_dir: Path, n_queries: int, known: list[int], seed: int):
    """``[(name, problems, held_out_lists, prior)]`` per known-pairs setting."""
    from learn_ohsumed import keyword_graph, load_queries, select_queries

    from bayesrank.data.pairs import pairs_from_grades, split_pairs

    queries, _ = select_queries(load_queries(data_dir), str(n_queries), max(known) + 100, seed)
    graphs = [keyword_graph(data_dir, q, 10) for q in queries]
    key = jax.random.key(seed)
    out = []
    for n_known in known:
        problems, held = [], []
        for q, W in zip(queries, graphs, strict=True):
            k = jax.random.fold_in(jax.random.fold_in(key, n_known), int(q.qid))
            kn, ho = split_pairs(k, pairs_from_grades(q.grades), n_known)
            problems.append(PreferenceProblem.create(kn, X=q.X, relations=[W]))
            held.append(ho)
        out.append((f"OHSUMED, {n_known} known", problems, held, ohsumed_prior()))
    return out, [q.qid for q in queries]


def synthetic_settings(seed: int, n=50, d=3, per_setting=4, n_held=500):
    rng = np.random.default_rng(seed)
    out = []
    for kappa in (1.0, 3.0):
        prior = XPGP(
            RBF(jnp.asarray(kappa), jnp.asarray(1 / np.sqrt(d))),
            entity=Independent(jnp.asarray(0.1)),
        )
        for m in (20, 100, 400):
            problems, held = [], []
            for _ in range(per_setting):
                X = rng.normal(size=(n, d))
                K = np.asarray(prior.covariance(jnp.asarray(X)))
                xi = rng.multivariate_normal(np.zeros(n), K)
                pairs = np.array([rng.choice(n, 2, replace=False) for _ in range(m + n_held)])
                win = rng.random(m) < stats.norm.cdf(xi[pairs[:m, 0]] - xi[pairs[:m, 1]])
                known = np.where(win[:, None], pairs[:m], pairs[:m, ::-1])
                ho = pairs[m:]
                ho = np.where((xi[ho[:, 0]] > xi[ho[:, 1]])[:, None], ho, ho[:, ::-1])
                problems.append(PreferenceProblem.create(known, X=X))
                held.append(ho)
            out.append((f"synthetic, kappa={kappa:g}, m={m}", problems, held, prior))
    return out


def fit_ep(K, data):
    def one(K, pairs, pair_mask):
        return ep.fit(K, pairs, pair_mask=pair_mask, tol=1e-8, max_iter=500)

    return jax.jit(jax.vmap(one))(K, data.pairs, data.pair_mask)


def compare(name, problems, held, prior, args, key) -> dict:
    batch = stack_problems(problems)
    data = prepare_batch(prior, batch)
    K = covariances(prior, data)
    start = time.perf_counter()
    post_ep = fit_ep(K, data)
    jax.block_until_ready(post_ep.mean)
    t_ep = time.perf_counter() - start
    start = time.perf_counter()
    posts = nuts.sample_batch(
        key,
        K,
        data.pairs,
        pair_mask=data.pair_mask,
        num_warmup=args.warmup,
        num_samples=args.samples,
        num_chains=args.chains,
    )
    t_nuts = time.perf_counter() - start
    rows, scatter = [], []
    for b, (problem, ho) in enumerate(zip(problems, held, strict=True)):
        n = problem.n
        post = posts[b]
        draws = post.draws[:, :n]
        ho = jnp.asarray(ho)
        p_ep = np.asarray(predict_pairs(post_ep.mean[b, :n], post_ep.cov[b, :n, :n], ho).prob)
        p_nuts = np.asarray(nuts.predict_pairs(draws, ho).prob)
        sd_ep = np.sqrt(np.diag(np.asarray(post_ep.cov[b]))[:n])
        sd_nuts = np.asarray(jnp.std(draws, axis=0))
        mu_ep, mu_nuts = np.asarray(post_ep.mean[b, :n]), np.asarray(post.mean[:n])
        sub = np.asarray(ho[:500])
        s = np.asarray(post.samples[..., :n])
        phi = stats.norm.cdf(s[..., sub[:, 0]] - s[..., sub[:, 1]])
        ess = nuts_ess(phi)
        mcse = phi.reshape(-1, len(sub)).std(0) / np.sqrt(ess)
        dp = np.abs(p_ep - p_nuts)
        rows.append(
            {
                "n": n,
                "m_known": len(problem.pairs),
                "m_held": len(ho),
                "dp_mean": float(dp.mean()),
                "dp_max": float(dp.max()),
                "dmu_mean": float(np.abs(mu_ep - mu_nuts).mean()),
                "dmu_max": float(np.abs(mu_ep - mu_nuts).max()),
                "dsd_mean": float(np.abs(sd_ep - sd_nuts).mean()),
                "dsd_max": float(np.abs(sd_ep - sd_nuts).max()),
                "sd_nuts": float(np.median(sd_nuts)),
                "acc_ep": float(np.mean(p_ep > 0.5)),
                "acc_nuts": float(np.mean(p_nuts > 0.5)),
                "mcse_p": float(np.median(mcse)),
                "r_hat_max": float(np.nanmax(post.diagnostics.r_hat[:n])),
                "ess_min": float(np.nanmin(post.diagnostics.ess[:n])),
                "divergences": int(post.diagnostics.divergences.sum()),
                "ep_converged": bool(post_ep.converged[b]),
            }
        )
        scatter.append((p_ep[:2000], p_nuts[:2000]))
    agg = {k: float(np.mean([r[k] for r in rows])) for k in rows[0] if k != "ep_converged"}
    for k in ("dp_max", "dmu_max", "dsd_max", "r_hat_max"):
        agg[k] = float(np.max([r[k] for r in rows]))
    agg["ess_min"] = float(np.min([r["ess_min"] for r in rows]))
    agg["divergences"] = int(np.sum([r["divergences"] for r in rows]))
    agg["ep_not_converged"] = int(np.sum([not r["ep_converged"] for r in rows]))
    print(
        f"{name}: {len(problems)} problems, EP {t_ep:.1f} s, NUTS {t_nuts:.1f} s "
        f"(compilation included); mean |dp| {agg['dp_mean']:.4f}",
        flush=True,
    )
    return {
        "name": name,
        "problems": len(problems),
        "aggregate": agg,
        "per_problem": rows,
        "seconds": {"ep": t_ep, "nuts": t_nuts},
        "scatter": scatter,
    }


def nuts_ess(x):
    from numpyro.diagnostics import effective_sample_size

    return effective_sample_size(x)


def table(results) -> str:
    head = (
        "| setting | problems | n | mean abs dp | max abs dp | mean abs dmu | max abs dmu | "
        "mean abs dsd | max abs dsd | NUTS sd | acc EP | acc NUTS | MCSE p | max R-hat | "
        "min ESS | div. |\n" + "|---" * 16 + "|\n"
    )
    lines = []
    for r in results:
        a = r["aggregate"]
        lines.append(
            f"| {r['name']} | {r['problems']} | {a['n']:.0f} | {a['dp_mean']:.4f} | "
            f"{a['dp_max']:.3f} | {a['dmu_mean']:.3f} | {a['dmu_max']:.3f} | "
            f"{a['dsd_mean']:.3f} | {a['dsd_max']:.3f} | {a['sd_nuts']:.2f} | "
            f"{a['acc_ep']:.3f} | {a['acc_nuts']:.3f} | {a['mcse_p']:.4f} | "
            f"{a['r_hat_max']:.3f} | {a['ess_min']:.0f} | {a['divergences']} |"
        )
    return head + "\n".join(lines)


def save_plot(results, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    cols = 4
    rows = -(-len(results) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.2 * rows), squeeze=False)
    for ax, r in zip(axes.ravel(), results, strict=False):
        for p_ep, p_nuts in r["scatter"]:
            ax.plot(p_nuts, p_ep, ".", ms=1.5, alpha=0.4)
        ax.plot([0, 1], [0, 1], "k-", lw=0.5)
        ax.set_title(f"{r['name']}\nmean |dp| {r['aggregate']['dp_mean']:.4f}", fontsize=8)
        ax.set_xlabel("NUTS P(i > j)", fontsize=8)
        ax.set_ylabel("EP P(i > j)", fontsize=8)
    for ax in axes.ravel()[len(results) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=REPO_ROOT / ".." / "shared" / "data")
    parser.add_argument("--queries", type=int, default=10)
    parser.add_argument("--known", type=int, nargs="+", default=[100, 200])
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument("--skip-ohsumed", action="store_true")
    parser.add_argument("--all-cpus", action="store_true", help="do not pin to one CPU")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "experiments/out/ep_vs_nuts")
    args = parser.parse_args(argv)
    wall = time.perf_counter()
    key = jax.random.key(args.seed)
    settings, qids = [], []
    if not args.skip_ohsumed:
        ohs, qids = ohsumed_settings(args.data_dir.resolve(), args.queries, args.known, args.seed)
        settings += ohs
        print(f"OHSUMED queries: {' '.join(qids)}")
    if not args.skip_synthetic:
        settings += synthetic_settings(args.seed)
    results = []
    for s, (name, problems, held, prior) in enumerate(settings):
        results.append(compare(name, problems, held, prior, args, jax.random.fold_in(key, s)))
    seconds = time.perf_counter() - wall
    print(
        f"\nNUTS: {args.chains} chains x {args.samples} draws after {args.warmup} warm-up; "
        f"EP parallel, tol 1e-8. Total {seconds:.0f} s.\n"
    )
    print(table(results))
    args.out.mkdir(parents=True, exist_ok=True)
    payload = {
        "config": {k: str(v) for k, v in vars(args).items()},
        "ohsumed_queries": qids,
        "ohsumed_prior": OHSUMED_PRIOR,
        "results": [{k: v for k, v in r.items() if k != "scatter"} for r in results],
        "total_seconds": seconds,
    }
    (args.out / "results.json").write_text(json.dumps(payload, indent=1))
    print(f"\nwrote {args.out / 'results.json'}")
    if save_plot(results, args.out / "ep_vs_nuts.png"):
        print(f"wrote {args.out / 'ep_vs_nuts.png'}")


if __name__ == "__main__":
    main()
