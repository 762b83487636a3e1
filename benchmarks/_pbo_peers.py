"""Peers for the preferential Bayesian optimisation (PBO) benchmark: BoTorch and Optuna.

Each ``run_<peer>(f, dim, n_answers, noise, seed, n_init=1)`` runs one closed PBO loop on a
utility ``f`` (a plain callable: ``(k, d)`` numpy points in ``[0, 1]^d`` to ``(k,)`` utilities,
to be MAXIMISED) and returns::

    {"best_guess": [float] * (n_answers + 1),  # f at the model's best guess after answer k
     "best_shown": [float] * (n_answers + 1),  # the best f among the designs shown so far
     "iteration_s": [float] * n_answers,       # wall seconds of each iteration
     "total_s": float,                         # wall seconds of the whole run
     "final_fit_s": float,                     # the last fit, for best_guess[n_answers] only
     "warnings": {str: int},                   # warnings raised during the run, by category
     "warning_messages": [str],                # ... and their distinct messages
     "designs": [[float] * dim],               # the designs shown, in order (rows)
     "comparisons": [[winner_row, loser_row]], # the answers, in order
     "settings": {...}}                        # what was run, with the libraries' versions

It is meant to be imported by the benchmark script, which runs bayesrank's own loop beside these
peers in separate processes, and it runs standalone for a quick look::

    python benchmarks/_pbo_peers.py --peer botorch --function hartmann6 --answers 10 --seed 0

The protocol (bayesrank's loop follows the same, so that one seed gives the same initial data
and the same stream of answer draws):

* An answer to "is design ``a`` better than design ``b``?" is ``True`` (``a`` wins) iff
  ``rng_answers.random() < Phi((f(a) - f(b)) / noise)``.
* The numpy generators and the exact order of their calls, per run:

  1. ``rng_init = numpy.random.default_rng(seed + 1)``;
     ``X0 = rng_init.random((n_init, 2, dim))``: one call, the only use of ``rng_init``.
  2. ``rng_answers = numpy.random.default_rng(seed)``; for ``i = 0 .. n_init - 1`` in order, one
     ``rng_answers.random()`` answers the pair ``(a, b) = (X0[i, 0], X0[i, 1])``.
  3. Iteration ``k = 1 .. n_answers``: one ``rng_answers.random()`` answers the iteration's pair
     ``(a, b)`` (BoTorch: the two rows of ``optimize_acqf``'s candidate, in order; Optuna: the
     incumbent, then the sampler's new design).

  Nothing else draws from either generator. The peers' own randomness (BoTorch's raw samples
  and restarts, the Optuna sampler's Gibbs sampling and restarts) comes from torch, seeded by
  ``seed`` inside a ``torch.random.fork_rng`` (BoTorch) or by the sampler's own ``seed``
  (Optuna).
* ``best_guess[k]``: after ``k`` answers (``k = 0``: the initial data only), the design with the
  highest posterior mean among all designs shown so far, and the true ``f`` there.
  ``best_shown[k]``: the best true ``f`` among those designs (for information).
* Iteration ``k`` = fit on the data after ``k - 1`` answers (this model also gives
  ``best_guess[k - 1]``) + acquisition optimisation + the answer + bookkeeping, timed as one.
  ``best_guess[n_answers]`` needs one more fit after the last answer: it is counted in
  ``total_s`` (and reported as ``final_fit_s``) but in no iteration. Imports are not timed;
  the first iteration of a process pays torch's and the peers' first-call costs.
* ``n_init=1`` by default: the BoTorch tutorial's start (one random pair, answered once), which
  is also the dashboard's (two random trials, then one new trial per round).

Reproducibility: a seed fixes the initial designs and the answer draws exactly. Optuna's runs
repeated bit for bit here; BoTorch's differed between runs of the same seed in the 7th to 13th
digit of the best guess (oneMKL's floating point, with 1 thread as with 2), so later proposals
can drift apart over long runs.

Threads: measured 2026-11-26 on 2 cores, while other work shared the machine, BoTorch with torch's
default 2 threads took 18-29 s for 10 answers on Hartmann-6 against 1.5-1.9 s with 1 thread;
on an idle machine both took about 1.5 s. Optuna's sampler was insensitive (about 1.4 s). Pin the
threads (``torch_threads=``) the same way for every process compared.

The peers:

* ``run_botorch``: BoTorch's preference-BO tutorial (``tutorials/preference_bo/
  preference_bo.ipynb``, read at pytorch/botorch ``e390e13``, 2025-10-08) as written:
  ``PairwiseGP(X, comparisons, input_transform=Normalize(d))`` with
  ``PairwiseLaplaceMarginalLogLikelihood`` and ``fit_gpytorch_mll``, refitted from scratch every
  iteration; ``AnalyticExpectedUtilityOfBestOption`` (EUBO, Lin et al. 2022) over a pair,
  ``optimize_acqf(q=2, num_restarts=3, raw_samples=512)`` on the unit cube, float64; torch's
  default thread count (the tutorial does not set it). ``acquisition="qeubo"`` uses
  ``qExpectedUtilityOfBestOption`` (Astudillo et al. 2023) instead.
* ``run_optuna``: ``optuna_dashboard.preferential.samplers.gp.PreferentialGPSampler`` (Takeno et
  al., ICML 2023; package ``optuna-dashboard``, 0.21.0 checked), driven through the preferential
  study API without a browser (``run_optuna``'s docstring).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
import warnings
from collections import Counter
from collections.abc import Callable

import numpy as np

__all__ = ["FUNCTIONS", "ackley", "hartmann6", "run_botorch", "run_optuna"]

# --- test functions (numpy, standalone; the package has its own jax versions) ---------------------

_H6_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
_H6_A = np.array(
    [
        [10.0, 3.0, 17.0, 3.5, 1.7, 8.0],
        [0.05, 10.0, 17.0, 0.1, 8.0, 14.0],
        [3.0, 3.5, 1.7, 10.0, 17.0, 8.0],
        [17.0, 8.0, 0.05, 10.0, 0.1, 14.0],
    ]
)
_H6_P = 1e-4 * np.array(
    [
        [1312.0, 1696.0, 5569.0, 124.0, 8283.0, 5886.0],
        [2329.0, 4135.0, 8307.0, 3736.0, 1004.0, 9991.0],
        [2348.0, 1451.0, 3522.0, 2883.0, 3047.0, 6650.0],
        [4047.0, 8828.0, 8732.0, 5743.0, 1091.0, 381.0],
    ]
)


def hartmann6(x: np.ndarray) -> np.ndarray:
    """Negated Hartmann-6 on ``[0, 1]^6``: ``(k, 6) -> (k,)``, maximum 3.32237."""
    x = np.asarray(x, dtype=np.float64)
    inner = np.sum(_H6_A * (x[..., None, :] - _H6_P) ** 2, axis=-1)  # (k, 4)
    return np.sum(_H6_ALPHA * np.exp(-inner), axis=-1)


def ackley(x: np.ndarray) -> np.ndarray:
    """Negated Ackley, the unit cube mapped onto ``[-32.768, 32.768]^d``: ``(k, d) -> (k,)``,
    maximum 0 at ``x = 0.5``."""
    z = -32.768 + 65.536 * np.asarray(x, dtype=np.float64)
    value = (
        -20.0 * np.exp(-0.2 * np.sqrt(np.mean(z**2, axis=-1)))
        - np.exp(np.mean(np.cos(2.0 * math.pi * z), axis=-1))
        + 20.0
        + math.e
    )
    return -value


#: name -> (function, default dimension or None for any, optimum value)
FUNCTIONS: dict[str, tuple[Callable, int | None, float]] = {
    "hartmann6": (hartmann6, 6, 3.32237),
    "ackley": (ackley, None, 0.0),
}

# --- the protocol ---------------------------------------------------------------------------------


def _phi(z: float) -> float:
    """The standard normal CDF."""
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


class _Protocol:
    """The designs shown, the answers and the records, shared by both peers.

    ``X``: the designs shown, ``(N, dim)``, in order (pair ``i`` is rows ``2i, 2i + 1`` for the
    initial pairs; later rows as ``add`` appends them); ``wins``: ``[winner_row, loser_row]``
    per answer.
    """

    def __init__(self, f: Callable, dim: int, noise: float, seed: int, n_init: int) -> None:
        if noise <= 0:
            raise ValueError(f"noise must be > 0, got {noise}")
        if n_init < 1:
            raise ValueError(f"n_init must be >= 1, got {n_init}")
        self.f, self.dim, self.noise = f, dim, float(noise)
        self.rng_answers = np.random.default_rng(seed)
        rng_init = np.random.default_rng(seed + 1)
        self.X0 = rng_init.random((n_init, 2, dim))
        self.X = np.empty((0, dim))
        self.fX = np.empty(0)
        self.wins: list[tuple[int, int]] = []
        self.best_guess: list[float] = []
        self.best_shown: list[float] = []

    def add(self, design: np.ndarray) -> int:
        """Show a new design; returns its row."""
        design = np.asarray(design, dtype=np.float64).reshape(1, self.dim)
        self.X = np.concatenate([self.X, design])
        self.fX = np.concatenate([self.fX, np.asarray(self.f(design), dtype=np.float64)])
        return len(self.X) - 1

    def answer(self, ia: int, ib: int) -> bool:
        """Answer "is row ``ia`` better than row ``ib``?" (one ``rng_answers.random()``) and
        record it; returns whether ``ia`` won."""
        p = _phi((self.fX[ia] - self.fX[ib]) / self.noise)
        a_wins = bool(self.rng_answers.random() < p)
        self.wins.append((ia, ib) if a_wins else (ib, ia))
        return a_wins

    def initial(self) -> None:
        """The ``n_init`` random pairs, answered in order."""
        for a, b in self.X0:
            self.answer(self.add(a), self.add(b))

    def record(self, posterior_mean: np.ndarray) -> int:
        """Record ``best_guess`` and ``best_shown`` from the posterior mean at the designs shown
        so far; returns the best guess's row."""
        mean = np.asarray(posterior_mean, dtype=np.float64).reshape(-1)
        if mean.shape != (len(self.X),):
            raise ValueError(f"posterior mean of shape {mean.shape} for {len(self.X)} designs")
        best = int(np.argmax(mean))
        self.best_guess.append(float(self.fX[best]))
        self.best_shown.append(float(np.max(self.fX)))
        return best


def _result(proto, iteration_s, total_s, final_fit_s, caught, settings) -> dict:
    return {
        "best_guess": proto.best_guess,
        "best_shown": proto.best_shown,
        "iteration_s": iteration_s,
        "total_s": total_s,
        "final_fit_s": final_fit_s,
        "warnings": dict(Counter(w.category.__name__ for w in caught)),
        "warning_messages": sorted({f"{w.category.__name__}: {w.message}" for w in caught}),
        "designs": proto.X.tolist(),
        "comparisons": [list(w) for w in proto.wins],
        "settings": settings,
    }


# --- BoTorch --------------------------------------------------------------------------------------

# preference_bo.ipynb: NUM_RESTARTS = 3, RAW_SAMPLES = 512, q = 2, q_comp = 1, initial data one
# random pair answered once (generate_data(q) + generate_comparisons(init_y, q_comp)).
BOTORCH_NUM_RESTARTS = 3
BOTORCH_RAW_SAMPLES = 512


def run_botorch(
    f: Callable,
    dim: int,
    n_answers: int,
    noise: float,
    seed: int,
    n_init: int = 1,
    *,
    acquisition: str = "eubo",
    num_restarts: int = BOTORCH_NUM_RESTARTS,
    raw_samples: int = BOTORCH_RAW_SAMPLES,
    input_bounds: str = "learned",
    torch_threads: int | None = None,
) -> dict:
    """BoTorch ``PairwiseGP`` + EUBO, as BoTorch's preference-BO tutorial runs it.

    Per iteration: a new ``PairwiseGP(X, comparisons, input_transform=Normalize(d=dim))`` on all
    designs shown and all answers, ``fit_gpytorch_mll`` on its
    ``PairwiseLaplaceMarginalLogLikelihood`` (from scratch, as the tutorial's
    ``init_and_fit_model``), the posterior mean at the shown designs (the previous answer's best
    guess), then ``optimize_acqf`` of the acquisition over ``q = 2`` designs in the unit cube.

    ``acquisition="eubo"`` (default, the tutorial's): ``AnalyticExpectedUtilityOfBestOption``,
    the closed form of ``E[max(f(x1), f(x2))]`` under the Laplace posterior. For ``q = 2`` it is
    exactly the quantity qEUBO (Astudillo et al. 2023) estimates by Monte Carlo, without the MC
    error and with exact gradients, so the tutorial uses it for pairs; ``"qeubo"``:
    ``qExpectedUtilityOfBestOption`` with BoTorch's default sampler, for comparison.

    ``Normalize(d=dim)`` with no bounds learns them from the shown designs (the tutorial's
    choice, kept as written: ``input_bounds="learned"``); with few designs, the rest of the
    cube then lies outside ``[0, 1]`` after the transform and EUBO tends to propose corners.
    ``input_bounds="unit"``: ``Normalize(d=dim, bounds=unit cube)`` (the identity here).
    ``torch_threads=None`` keeps torch's default thread count (the tutorial sets none);
    an integer calls ``torch.set_num_threads`` first (module docstring, "Threads": with other
    work on the 2 cores, 2 threads made this loop 10-15x slower than 1). A fit that fails raises
    (``fit_gpytorch_mll``'s ``ModelFittingError``), as in the tutorial.
    """
    import botorch
    import gpytorch
    import torch
    from botorch.acquisition.preference import (
        AnalyticExpectedUtilityOfBestOption,
        qExpectedUtilityOfBestOption,
    )
    from botorch.fit import fit_gpytorch_mll
    from botorch.models.pairwise_gp import PairwiseGP, PairwiseLaplaceMarginalLogLikelihood
    from botorch.models.transforms.input import Normalize
    from botorch.optim import optimize_acqf

    if acquisition not in ("eubo", "qeubo"):
        raise ValueError(f"acquisition must be 'eubo' or 'qeubo', got {acquisition!r}")
    if input_bounds not in ("learned", "unit"):
        raise ValueError(f"input_bounds must be 'learned' or 'unit', got {input_bounds!r}")
    dtype = torch.float64
    bounds = torch.stack([torch.zeros(dim, dtype=dtype), torch.ones(dim, dtype=dtype)])
    normalize_bounds = None if input_bounds == "learned" else bounds
    if torch_threads is not None:
        torch.set_num_threads(torch_threads)

    def fit(proto: _Protocol):
        X = torch.tensor(proto.X, dtype=dtype)
        comps = torch.tensor(proto.wins, dtype=torch.long)
        model = PairwiseGP(X, comps, input_transform=Normalize(d=dim, bounds=normalize_bounds))
        mll = PairwiseLaplaceMarginalLogLikelihood(model.likelihood, model)
        fit_gpytorch_mll(mll)
        with torch.no_grad():
            mean = model.posterior(X).mean.reshape(-1).numpy()
        return model, mean

    iteration_s: list[float] = []
    with warnings.catch_warnings(record=True) as caught, torch.random.fork_rng():
        warnings.simplefilter("always")
        torch.manual_seed(seed)
        start = time.perf_counter()
        proto = _Protocol(f, dim, noise, seed, n_init)
        proto.initial()
        for _ in range(n_answers):
            t0 = time.perf_counter()
            model, mean = fit(proto)
            proto.record(mean)
            if acquisition == "eubo":
                acqf = AnalyticExpectedUtilityOfBestOption(pref_model=model)
            else:
                acqf = qExpectedUtilityOfBestOption(pref_model=model)
            cand, _ = optimize_acqf(
                acq_function=acqf,
                bounds=bounds,
                q=2,
                num_restarts=num_restarts,
                raw_samples=raw_samples,
            )
            pair = cand.detach().to(dtype).numpy()
            proto.answer(proto.add(pair[0]), proto.add(pair[1]))
            iteration_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        _, mean = fit(proto)
        proto.record(mean)
        final_fit_s = time.perf_counter() - t0
        total_s = time.perf_counter() - start
        threads = torch.get_num_threads()

    settings = {
        "peer": "botorch",
        "versions": {
            "botorch": botorch.__version__,
            "gpytorch": gpytorch.__version__,
            "torch": torch.__version__,
        },
        "tutorial": "tutorials/preference_bo/preference_bo.ipynb (pytorch/botorch e390e13)",
        "model": (
            "PairwiseGP(X, comparisons, input_transform=Normalize(d))"
            if input_bounds == "learned"
            else "PairwiseGP(X, comparisons, input_transform=Normalize(d, bounds=unit cube))"
        ),
        "input_bounds": input_bounds,
        "mll": "PairwiseLaplaceMarginalLogLikelihood, fit_gpytorch_mll, refit from scratch",
        "acquisition": (
            "AnalyticExpectedUtilityOfBestOption"
            if acquisition == "eubo"
            else "qExpectedUtilityOfBestOption (default sampler)"
        ),
        "q": 2,
        "num_restarts": num_restarts,
        "raw_samples": raw_samples,
        "bounds": "unit cube",
        "dtype": "float64",
        "torch_threads": threads,
        "torch_seed": seed,
        "n_init": n_init,
        "n_answers": n_answers,
        "noise": noise,
        "seed": seed,
        "best_guess": "argmax of the posterior mean over the shown designs",
    }
    return _result(proto, iteration_s, total_s, final_fit_s, caught, settings)


# --- Optuna (optuna-dashboard's preferential GP sampler) ------------------------------------------

# EP sweeps for the posterior mean at the shown designs (the sampler's own hyperparameter fit
# uses 2 sweeps inside its marginal likelihood; a mean to rank designs by gets more).
OPTUNA_EP_CYCLES = 10


def run_optuna(
    f: Callable,
    dim: int,
    n_answers: int,
    noise: float,
    seed: int,
    n_init: int = 1,
    *,
    incumbent: str = "survivor",
    ep_cycles: int = OPTUNA_EP_CYCLES,
    torch_threads: int | None = None,
) -> dict:
    """Optuna's preferential GP sampler (Takeno et al., ICML 2023), driven programmatically.

    Where it lives: ``optuna_dashboard.preferential.samplers.gp.PreferentialGPSampler``, in the
    ``optuna-dashboard`` package (0.21.0; it needs botorch and torch, which it imports, and adds
    only ``bottle``). It is an ordinary Optuna sampler on a preferential study
    (``optuna_dashboard.preferential.create_study``), so no dashboard or browser is needed:

    * ``create_study(n_generate=2, sampler=PreferentialGPSampler(seed=seed))``, in memory.
      ``n_generate`` is the number of *active* trials (not yet reported worse) the dashboard
      keeps on show: with 2, every round shows the surviving trial and ONE new trial from
      ``study.ask()``; the user picks the better, the other is reported worse. So each ask
      proposes one design, and the pair is (incumbent, new design).
    * Initial designs: ``study.enqueue_trial`` + ``study.ask`` + ``suggest_float`` (enqueued
      values are fixed params, which never call the sampler), all ``2 n_init`` asked before any
      preference is reported, so no GP is fitted for them.
    * Iteration: ``trial = study.ask()``; the first ``trial.suggest_float("x000", 0, 1)`` calls
      the sampler's ``sample_relative``: an EP fit of the Matern-3/2 ARD kernel's lengthscales
      and the noise (L-BFGS, warm-started from the last iteration's), one Gibbs sample of the
      latent differences (the hallucination), then ``LogExpectedImprovement`` on that sampled
      GP over the best posterior mean at the shown designs, maximised by
      ``optimize_acqf(q=1, num_restarts=10, raw_samples=512, sequential=True,
      options={"batch_limit": 5, "maxiter": 200})``. The answer goes back with
      ``study.report_preference(better_trial, worse_trial)``.
    * ``incumbent``: ``"survivor"`` (default): the winner of the most recent answer, i.e. the
      dashboard's surviving active trial with ``n_generate=2`` (exactly the dashboard's workflow
      when ``n_init = 1``; with more initial pairs the dashboard would show every initial
      winner at once, which this one-pair protocol cannot); ``"best_guess"``: the shown design
      with the highest posterior mean (the model's current best; use whichever the benchmark
      states).

    The best guess: the sampler exposes no posterior mean (its ``_SampledGP`` is one
    hallucinated sample), so the mean at the shown designs is computed here with the sampler's
    own model: its EP routine (``optuna_dashboard.preferential.samplers.gp._orthants_MVN_EP_jit``,
    a private function, ``ep_cycles`` sweeps) under the kernel and noise the sampler has just
    fitted (``sampler._gp``). That fit is made inside ``ask`` on the data after ``k - 1``
    answers, before the proposal, so it gives ``best_guess[k - 1]`` at no extra fit; the last
    one calls ``sampler._gp.fit_params_EP`` once more after the last answer. The EP mean's time
    is inside the iteration (bookkeeping); it never changes what the sampler proposes.

    ``torch_threads``: as for :func:`run_botorch` (``None``: torch's default).
    """
    import optuna
    import optuna_dashboard
    import torch
    from optuna_dashboard.preferential import create_study
    from optuna_dashboard.preferential.samplers.gp import (
        PreferentialGPSampler,
        _orthants_MVN_EP_jit,
    )

    if incumbent not in ("survivor", "best_guess"):
        raise ValueError(f"incumbent must be 'survivor' or 'best_guess', got {incumbent!r}")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if torch_threads is not None:
        torch.set_num_threads(torch_threads)
    # Zero-padded names: the sampler orders its search space by name, so columns = dimensions.
    names = [f"x{i:03d}" for i in range(dim)]

    def suggest(trial) -> np.ndarray:
        return np.array([trial.suggest_float(name, 0.0, 1.0) for name in names])

    def ep_mean(proto: _Protocol, sampler) -> np.ndarray:
        """The EP posterior mean of the latent utility at the shown designs, under the
        sampler's current kernel and noise (the search space's [0, 1] transform is the
        identity, so the designs are the sampler's inputs as they are)."""
        gp = sampler._gp
        with torch.no_grad():
            X = torch.tensor(proto.X, dtype=torch.float64)
            prefs = torch.tensor(proto.wins, dtype=torch.int32)
            cov0 = gp.kernel.forward(X, X).to_dense()
            mu, _, _ = _orthants_MVN_EP_jit(cov0, prefs, gp.log_noise.exp(), cycles=ep_cycles)
        return mu.numpy()

    iteration_s: list[float] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        proto = _Protocol(f, dim, noise, seed, n_init)
        sampler = PreferentialGPSampler(seed=seed)
        study = create_study(n_generate=2, sampler=sampler)
        trials = []  # row of proto.X -> its trial
        for a, b in proto.X0:
            study.enqueue_trial(dict(zip(names, a.tolist(), strict=True)))
            study.enqueue_trial(dict(zip(names, b.tolist(), strict=True)))
        for _ in range(2 * n_init):
            trial = study.ask()
            trials.append(trial)
            x = suggest(trial)
            if not np.array_equal(x, proto.X0.reshape(-1, dim)[len(trials) - 1]):
                raise RuntimeError("an enqueued initial design came back changed")
        for i in range(n_init):
            proto.answer(proto.add(proto.X0[i, 0]), proto.add(proto.X0[i, 1]))
            study.report_preference(trials[proto.wins[-1][0]], trials[proto.wins[-1][1]])
        for _ in range(n_answers):
            t0 = time.perf_counter()
            trial = study.ask()
            x = suggest(trial)  # the sampler fits and proposes here
            best = proto.record(ep_mean(proto, sampler))  # best_guess[k - 1]
            inc = proto.wins[-1][0] if incumbent == "survivor" else best
            trials.append(trial)
            new = proto.add(x)
            proto.answer(inc, new)
            study.report_preference(trials[proto.wins[-1][0]], trials[proto.wins[-1][1]])
            iteration_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        if sampler._gp is None:  # n_answers == 0: let the sampler build its model (its fit
            suggest(study.ask())  # and a proposal that is never shown)
        sampler._gp.fit_params_EP(
            torch.tensor(proto.X, dtype=torch.float64),
            torch.tensor(proto.wins, dtype=torch.int32),
        )
        proto.record(ep_mean(proto, sampler))
        final_fit_s = time.perf_counter() - t0
        total_s = time.perf_counter() - start
        threads = torch.get_num_threads()

    kernel = sampler._gp.kernel
    settings = {
        "peer": "optuna",
        "versions": {
            "optuna": optuna.__version__,
            "optuna_dashboard": optuna_dashboard.__version__,
            "torch": torch.__version__,
        },
        "sampler": "optuna_dashboard.preferential.samplers.gp.PreferentialGPSampler(seed=seed)",
        "study": "optuna_dashboard.preferential.create_study(n_generate=2), in memory",
        "kernel": "MaternKernel(nu=1.5, ARD), lengthscale prior Gamma(5, 10) (sampler default)",
        "noise_prior": "Gamma(5, 50) on the noise variance (sampler default)",
        "acquisition": (
            "LogExpectedImprovement on one Gibbs-sampled (hallucinated) GP, best_f = max "
            "sampled posterior mean at the shown designs; optimize_acqf(q=1, num_restarts=10, "
            "raw_samples=512, sequential=True, batch_limit=5, maxiter=200) (sampler's own)"
        ),
        "pair": f"(incumbent, new design); incumbent = {incumbent}",
        "best_guess": (
            f"argmax of the EP posterior mean ({ep_cycles} sweeps, the sampler's "
            "_orthants_MVN_EP_jit) over the shown designs, under the sampler's fitted kernel "
            "and noise"
        ),
        "final_hyperparameters": {
            "lengthscale": kernel.lengthscale.detach().reshape(-1).tolist(),
            "noise_var": float(sampler._gp.log_noise.detach().exp()),
        },
        "torch_threads": threads,
        "n_init": n_init,
        "n_answers": n_answers,
        "noise": noise,
        "seed": seed,
    }
    return _result(proto, iteration_s, total_s, final_fit_s, caught, settings)


PEERS = {"botorch": run_botorch, "optuna": run_optuna}


def main(argv: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer", choices=sorted(PEERS), default="botorch")
    parser.add_argument("--function", choices=sorted(FUNCTIONS), default="hartmann6")
    parser.add_argument("--dim", type=int, default=None, help="ackley: default 4")
    parser.add_argument("--answers", type=int, default=10)
    parser.add_argument("--noise", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-init", type=int, default=1)
    parser.add_argument(
        "--torch-threads", type=int, default=None, help="torch.set_num_threads (default: none)"
    )
    args = parser.parse_args(argv)

    fn, fixed_dim, optimum = FUNCTIONS[args.function]
    dim = args.dim or fixed_dim or 4
    if fixed_dim is not None and dim != fixed_dim:
        parser.error(f"{args.function} has dimension {fixed_dim}")
    out = PEERS[args.peer](
        fn,
        dim,
        args.answers,
        args.noise,
        args.seed,
        n_init=args.n_init,
        torch_threads=args.torch_threads,
    )
    if out is None:
        print(f"{args.peer}: not available")
        return None
    print(f"{args.peer} on {args.function} (d = {dim}, optimum {optimum}), noise {args.noise}")
    print(" k  best_guess  best_shown  iteration_s")
    for k, (guess, shown) in enumerate(zip(out["best_guess"], out["best_shown"], strict=True)):
        it = f"{out['iteration_s'][k - 1]:11.3f}" if k else "          -"
        print(f"{k:2d}  {guess:10.5f}  {shown:10.5f}  {it}")
    its = out["iteration_s"]
    if its:
        print(f"iteration median {statistics.median(its):.3f} s, sum {sum(its):.3f} s")
    print(f"final fit {out['final_fit_s']:.3f} s, total {out['total_s']:.3f} s")
    if out["warnings"]:
        print(f"warnings: {out['warnings']}")
    return out


if __name__ == "__main__":
    main()
