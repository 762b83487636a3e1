"""EP and NUTS on the same ``K`` and known pairs, and their comparison per test pair with NUTS's
Monte Carlo standard error."""

from __future__ import annotations

import time

import numpy as np

#: The share of ``|Z| > 2`` for a standard normal ``Z``.
BEYOND_2 = 0.0455


def posteriors(setting: dict, key, opt: dict):
    """EP on each problem and NUTS on all of the setting's problems in one compiled call, on the
    same ``K``: ``(EP posteriors, NUTS posteriors, seconds EP, seconds NUTS)``."""
    import jax
    import jax.numpy as jnp

    from ...data.batch import bucket_size, stack_problems
    from ...inference import ep, nuts
    from ...inference.nuts.sampler import first_entities
    from ...querymap import query_map_method

    problems = setting["problems"]
    Ks = []
    for prior, p in zip(setting["priors"], problems, strict=True):
        X = None if p.X is None else jnp.asarray(p.X)
        Ks.append(np.asarray(prior.covariance(X, prior.prepare(p.relations), np.ones(p.n, bool))))
    start = time.perf_counter()
    post_ep = [
        ep.fit(K, p.pairs, tol=1e-8, max_iter=500) for K, p in zip(Ks, problems, strict=True)
    ]
    t_ep = time.perf_counter() - start
    n_pad = bucket_size(max(p.n for p in problems))
    batch = stack_problems(problems, n_pad, bucket_size(max(len(p.pairs) for p in problems)))
    K_pad = np.tile(np.eye(n_pad), (len(problems), 1, 1))  # padded entities: decoupled, N(0, 1)
    for b, K in enumerate(Ks):
        K_pad[b, : len(K), : len(K)] = K
    start = time.perf_counter()
    post_nuts = nuts.sample_batch(
        key,
        K_pad,
        batch.pairs,
        pair_mask=batch.pair_mask,
        method=query_map_method(),
        num_warmup=opt["warmup"],
        num_samples=opt["samples"],
        num_chains=opt["chains"],
    )
    t_nuts = time.perf_counter() - start
    post_nuts = [first_entities(q, p.n) for q, p in zip(post_nuts, problems, strict=True)]
    jax.block_until_ready(post_ep[-1].mean)
    return post_ep, post_nuts, t_ep, t_nuts


def monte_carlo_error(samples, pairs, chunk: int = 1000) -> np.ndarray:
    """NUTS's Monte Carlo standard error of each pair's probability.

    Args:
        samples: ``(C, S, n)`` draws of the latent preferences (chains kept apart).
        pairs: ``(t, 2)``; done ``chunk`` pairs at a time (memory ``C * S * chunk``).

    Returns:
        ``(t,)``: ``sd(Phi(xi_i - xi_j)) / sqrt(ESS)`` over the ``C * S`` draws, the ESS
        NumPyro's (per pair, over the chains); where the ESS is not finite, ``C * S``.
    """
    from numpyro.diagnostics import effective_sample_size
    from scipy.special import ndtr

    s = np.asarray(samples)
    out = []
    for lo in range(0, len(pairs), chunk):
        sub = pairs[lo : lo + chunk]
        phi = ndtr(s[..., sub[:, 0]] - s[..., sub[:, 1]])  # (C, S, t)
        ess = np.asarray(effective_sample_size(phi), float)
        ess = np.where(np.isfinite(ess) & (ess > 0), ess, phi.shape[0] * phi.shape[1])
        out.append(phi.reshape(-1, len(sub)).std(axis=0, ddof=1) / np.sqrt(ess))
    return np.concatenate(out) if out else np.zeros(0)


def _accuracy(p) -> float:
    return float(np.mean(p > 0.5) + 0.5 * np.mean(p == 0.5))


def compare(setting: dict, key, opt: dict, progress) -> dict:
    """EP and NUTS on one setting: per problem the summary and the per-pair numbers, and the
    setting's aggregate."""
    post_ep, post_nuts, t_ep, t_nuts = posteriors(setting, key, opt)
    progress(f"{setting['name']}: EP {t_ep:.1f} s, NUTS {t_nuts:.1f} s")
    rows, pairs = [], []
    tiny = np.finfo(float).tiny
    for b, (label, problem, test) in enumerate(
        zip(setting["labels"], setting["problems"], setting["tests"], strict=True)
    ):
        ep, nuts = post_ep[b], post_nuts[b]
        p_ep = np.asarray(ep.predict_pairs(test).prob)
        p_nuts = np.asarray(nuts.predict_pairs(test).prob)
        mcse = monte_carlo_error(nuts.samples, test)
        dp = np.abs(p_ep - p_nuts)
        z = dp / np.maximum(mcse, tiny)
        dmu = np.abs(np.asarray(ep.mean) - np.asarray(nuts.mean))
        sd_ep = np.sqrt(np.clip(np.diag(np.asarray(ep.cov)), 0, None))
        sd_nuts = np.sqrt(np.clip(np.diag(np.asarray(nuts.cov)), 0, None))
        dsd = np.abs(sd_ep - sd_nuts)
        diag = nuts.diagnostics
        rows.append(
            {
                "problem": label,
                "n": problem.n,
                "known": len(problem.pairs),
                "test": len(test),
                "dp_mean": float(dp.mean()),
                "dp_max": float(dp.max()),
                "mcse_median": float(np.median(mcse)),
                "mcse_max": float(mcse.max()),
                "z_max": float(z.max()),
                "beyond_2_mcse": float(np.mean(z > 2)),
                "dmu_mean": float(dmu.mean()),
                "dmu_max": float(dmu.max()),
                "dsd_mean": float(dsd.mean()),
                "dsd_max": float(dsd.max()),
                "sd_nuts": float(np.median(sd_nuts)),
                "acc_ep": _accuracy(p_ep),
                "acc_nuts": _accuracy(p_nuts),
                "ep_converged": bool(ep.converged),
                "ep_sweeps": int(ep.n_iter),
                "r_hat_max": float(np.nanmax(diag.r_hat)),
                "ess_min": float(np.nanmin(diag.ess)),
                "divergences": int(np.sum(diag.divergences)),
                "nuts_converged": bool(diag.converged),
            }
        )
        pairs.append(
            {
                "known": np.asarray(problem.pairs).tolist(),
                "test": np.asarray(test).tolist(),
                "p_ep": p_ep.tolist(),
                "p_nuts": p_nuts.tolist(),
                "mcse": mcse.tolist(),
            }
        )
    agg = {
        k: float(np.mean([r[k] for r in rows]))
        for k in (
            "n",
            "dp_mean",
            "dmu_mean",
            "dsd_mean",
            "sd_nuts",
            "acc_ep",
            "acc_nuts",
            "mcse_median",
        )
    }
    for k in ("dp_max", "dmu_max", "dsd_max", "r_hat_max", "mcse_max", "z_max"):
        agg[k] = float(np.max([r[k] for r in rows]))
    z_all = np.concatenate([pair_z(p) for p in pairs])
    agg.update(
        pairs=len(z_all),
        beyond_2_mcse=float(np.mean(z_all > 2)),
        ess_min=float(np.min([r["ess_min"] for r in rows])),
        divergences=int(np.sum([r["divergences"] for r in rows])),
        ep_not_converged=int(np.sum([not r["ep_converged"] for r in rows])),
    )
    return {
        "name": setting["name"],
        "problems": rows,
        "aggregate": agg,
        "pairs": pairs,
        "seconds": {"ep": t_ep, "nuts": t_nuts},
    }


def pair_z(pairs: dict) -> np.ndarray:
    dp = np.abs(np.subtract(pairs["p_ep"], pairs["p_nuts"]))
    return dp / np.maximum(pairs["mcse"], np.finfo(float).tiny)
