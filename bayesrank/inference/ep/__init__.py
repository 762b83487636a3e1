"""Expectation propagation with two-dimensional sites for the probit pair likelihood.

Model (paper Sec. 4.1, DESIGN notation): ``xi_hat ~ N(0, K)``, observed pairs ``(i_s, j_s)`` with
likelihood ``Phi(xi_hat_i - xi_hat_j)``. EP replaces each pair's likelihood by a Gaussian *site on
the two entities it touches*, kept in natural parameters: rank one along ``[1, -1]``, which the
paper's moment form (Eq. 7-12) cannot represent (its 2x2 precision is singular). The posterior is
``q = N(mu, Sigma)``, ``Sigma = (K^-1 + S)^-1``; ``K`` is never inverted nor required to be
positive definite.

The package, one concept a module:

- ``sites``: moment matching of the sites (``Sites`` and their sparse algebra
  ``S = A^T diag(tau) A`` are shared with Laplace: ``bayesrank.inference.gaussian``);
- ``factor``: the posterior from a root ``K = M M^T`` and ``B = I + M^T S M``,
  ``posterior_moments``, ``posterior_from_sites``, ``predict_new`` (re-exported from
  ``bayesrank.inference.gaussian``, whose algebra EP and Laplace share);
- ``state``: ``EPState``, sequential and parallel sweeps, the damping rule;
- ``acceleration``: Anderson mixing of parallel sweeps;
- ``loop``: ``init`` / ``step`` (BlackJAX-style: a loop of ``step`` over the state is
  the algorithm) and ``iterate``;
- ``precision``: the float32-then-float64 wrapper;
- ``run``: ``run``, ``iterate(init(...))`` with the wrappers;
- ``evidence``: ``log_evidence`` with its closed-form gradient in ``K``;
- ``settings``: ``EP``, the engine: EP's settings as one object (``fit``'s ``settings``, and
  every caller's ``engine``, ``bayesrank.inference.engine``);
- ``fit``: ``fit`` (the core, and the validated, bucketed, jitted façade) and
  ``EPPosterior``, which predicts (``bayesrank.inference.posterior``).

Uninformative pairs: if the prior variance of ``d_s`` is zero (relative to ``K_ii + K_jj``, below
100 machine epsilons), e.g. two documents with identical features under an attribute-only kernel,
``d_s`` is 0 a.s. and the pair's likelihood is the constant ``Phi(0) = 1/2``. Such a pair keeps a
zero site, contributes ``log Phi(m / sqrt(1 + v))`` (= log 1/2) to the evidence and is counted
(``n_uninformative``). Add an entity effect (``kernels.Independent``) to tell duplicates apart.

Numerical policy (counted in the diagnostics, never an exception or NaN): a site whose cavity
variance would be non-positive keeps its old value for that sweep (``n_skipped``); a negative new
site precision (impossible in exact arithmetic for this log-concave likelihood) is set to zero
(``n_clipped``), which keeps ``S`` positive semi-definite and the posterior valid.
"""

from ..._moved import moved
from ..gaussian import posterior_from_sites, posterior_moments, predict_new
from ..gaussian.sites import Sites
from .evidence import log_evidence
from .fit import EPPosterior, fit, fit_core
from .loop import convergence_tol, default_tol, init, iterate, step
from .run import run
from .settings import EP
from .state import EPState

# The algorithm and its types. The helpers (settings' checks, padding, the site algebra, the
# constants) stay importable from their modules: ``from bayesrank.inference.ep.fit import
# check_settings``.
__all__ = [
    "EP",
    "EPPosterior",
    "EPState",
    "Sites",
    "convergence_tol",
    "default_tol",
    "fit",
    "fit_core",
    "init",
    "iterate",
    "log_evidence",
    "posterior_from_sites",
    "posterior_moments",
    "predict_new",
    "run",
    "step",
]


# The single module inference/ep.py exported these; they live in the package's modules now.
__getattr__ = moved(
    __name__,
    {
        "EPSettings": "bayesrank.inference.engines:EP",
        "EP_ADVICE": "bayesrank.inference.ep.fit",
        "MAX_ITER_LIMIT": "bayesrank.inference.ep.settings",
        "MIN_DAMPING": "bayesrank.inference.ep.state",
        "MIXED_SWITCH": "bayesrank.inference.ep.precision",
        "check_settings": "bayesrank.inference.ep.settings",
        "check_sites": "bayesrank.inference.ep.host",
        "informative_pairs": "bayesrank.inference.ep.sites",
        "loop_settings": "bayesrank.inference.ep.host",
        "pad_pairs": "bayesrank.inference.ep.host",
        "prior_root": "bayesrank.linalg",
        "psd_root": "bayesrank.linalg",
        "pseudo_data_precision": "bayesrank.inference.ep.evidence",
        "site_natural_parameters": "bayesrank.inference.ep.sites",
        "site_precision": "bayesrank.inference.ep.sites",
        "unpad_posterior": "bayesrank.inference.ep.host",
        "validate_problem": "bayesrank.inference.ep.host",
    },
)
