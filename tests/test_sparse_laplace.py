"""The precision-form engine (``bayesrank.inference.sparse``) against the dense Laplace engine on
the same prior's covariance, built here by hand with NumPy: the regularized Laplacian's inverse
``[(beta / w)(D - W + I / iota^2)]^-1``, the attribute kernel's Gram matrix, and their sum."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import scipy.sparse as sp

from bayesrank.inference import laplace
from bayesrank.inference import sparse as S
from bayesrank.kernels import RBF
from bayesrank.kernels.lowrank import pivoted_cholesky

pytestmark = pytest.mark.skipif(
    not jax.config.jax_enable_x64, reason="compares modes to 1e-8 (float64)"
)


def random_graph(n, seed, degree=4):
    W = sp.random(n, n, density=degree / n, random_state=seed)
    return ((W + W.T) > 0).astype(float)


def probit_pairs(n, m, seed):
    rng = np.random.default_rng(seed)
    u = rng.normal(size=n)
    i = rng.integers(0, n, m)
    j = (i + rng.integers(1, n, m)) % n
    return np.where((u[i] + rng.normal(size=m) > u[j])[:, None], np.c_[i, j], np.c_[j, i])


def laplacian_covariance(W, beta, iota, weight):
    Wd = W.toarray() if sp.issparse(W) else np.asarray(W)
    L = np.diag(Wd.sum(1)) - Wd
    return np.linalg.inv(beta / weight * (L + np.eye(len(L)) / iota**2))


def test_the_graph_precision_is_the_regularized_laplacians_inverse():
    """``Q = (beta / w) (L + I / iota^2)``, ``L = D - W``; products, diagonal and the dense form;
    a root draw's covariance ``B B^T`` is ``Q`` (the draw is linear in its normals: its Jacobian
    in them is ``B``)."""
    W = random_graph(40, 1)
    Q = S.laplacian_precision(W, beta=1.3, iota=0.7, weight=2.0)
    want = np.linalg.inv(laplacian_covariance(W, 1.3, 0.7, 2.0))
    np.testing.assert_allclose(Q.dense(), want, atol=1e-12)
    v = np.random.default_rng(1).normal(size=40)
    np.testing.assert_allclose(Q.matvec(v), want @ v, atol=1e-12)
    np.testing.assert_allclose(Q.diagonal(), np.diag(want), atol=1e-12)


def test_the_membership_form_is_the_projections_laplacian():
    """Groups (directors, genres) give the Laplacian of ``W_ij = #groups shared``, counted by
    hand; a repeated membership counts once, a one-member group adds nothing."""
    rng = np.random.default_rng(0)
    n = 25
    entities = rng.integers(0, n, 60)
    groups = rng.integers(0, 7, 60)
    entities = np.r_[entities, entities[0], 3]
    groups = np.r_[groups, groups[0], 99]
    W = np.zeros((n, n))
    for g in set(groups.tolist()):
        members = sorted(set(entities[groups == g].tolist()))
        for a in members:
            for b in members:
                if a != b:
                    W[a, b] += 1
    Q = S.membership_precision(entities, groups, n, beta=0.8, iota=1.7, weight=1.4)
    want = np.linalg.inv(laplacian_covariance(W, 0.8, 1.7, 1.4))
    np.testing.assert_allclose(Q.dense(), want, atol=1e-12)
    v = rng.normal(size=n)
    np.testing.assert_allclose(Q.matvec(v), want @ v, atol=1e-12)
    np.testing.assert_allclose(Q.diagonal(), np.diag(want), atol=1e-12)


@pytest.mark.slow  # 3 s or more in the fast loop
@pytest.mark.parametrize("Q", ["graph", "groups"])
def test_root_draws_have_covariance_q(Q):
    """40,000 draws: every entry of their second-moment matrix within 5 standard errors
    (``sqrt((Q_ii Q_jj + Q_ij^2) / N)``, a Gaussian's) of ``Q`` built by hand."""
    rng = np.random.default_rng(2)
    n = 20
    if Q == "graph":
        W = random_graph(n, 3)
        prec = S.laplacian_precision(W, beta=0.7, iota=2.0, weight=1.5)
        want = np.linalg.inv(laplacian_covariance(W, 0.7, 2.0, 1.5))
    else:
        entities, groups = rng.integers(0, n, 40), rng.integers(0, 5, 40)
        W = np.zeros((n, n))
        for g in range(5):
            members = sorted(set(entities[groups == g].tolist()))
            for a in members:
                for b in members:
                    W[a, b] += a != b
        prec = S.membership_precision(entities, groups, n)
        want = np.linalg.inv(laplacian_covariance(W, 1.0, 1.0, 1.0))
    N = 40_000
    draws = np.asarray(jax.vmap(prec.root_draw)(jax.random.split(jax.random.key(0), N)))
    second = draws.T @ draws / N
    se = np.sqrt((np.outer(np.diag(want), np.diag(want)) + want**2) / N)
    assert np.max(np.abs(second - want) / se) < 5


def test_the_pivoted_cholesky_is_exact_at_full_rank_and_bounded_below():
    """At rank ``n`` the root reproduces the Gram matrix; at lower rank the stated residual is
    the exact diagonal of ``K - Phi Phi^T``, which is PSD, and a pair's variance error is within
    ``2 (d_i + d_j)``."""
    X = np.random.default_rng(4).normal(size=(60, 3))
    kernel = RBF(kappa=1.2, rho=0.8)
    K = np.asarray(kernel(X))
    full = pivoted_cholesky(kernel, X, 60)
    np.testing.assert_allclose(full.features @ full.features.T, K, atol=1e-10)
    low = pivoted_cholesky(kernel, X, 15)
    R = K - np.asarray(low.features @ low.features.T)
    np.testing.assert_allclose(low.residual, np.diag(R), atol=1e-12)
    assert np.linalg.eigvalsh(R).min() > -1e-10
    d = np.asarray(low.residual)
    i, j = np.triu_indices(60, 1)
    pair_error = R[i, i] + R[j, j] - 2 * R[i, j]
    assert np.all(pair_error <= 2 * (d[i] + d[j]) + 1e-12)
    assert len(set(np.asarray(low.pivots).tolist())) == 15


def xpgp_problem(n=80, m=300, seed=0):
    """Attributes (RBF), two graphs and an entity effect; the dense covariance by hand."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    kernel = RBF(kappa=1.1, rho=0.9)
    W1, W2 = random_graph(n, seed + 1, 3), random_graph(n, seed + 2, 2)
    blocks = (
        S.laplacian_precision(W1, beta=1.0, iota=1.5, weight=2.0),
        S.laplacian_precision(W2, beta=0.5, iota=1.0, weight=1.0),
        S.diagonal_precision(np.full(n, 0.3)),
    )
    K = (
        np.asarray(kernel(X))
        + laplacian_covariance(W1, 1.0, 1.5, 2.0)
        + laplacian_covariance(W2, 0.5, 1.0, 1.0)
        + 0.3 * np.eye(n)
    )
    return X, kernel, blocks, K, probit_pairs(n, m, seed)


@pytest.mark.slow
def test_graph_only_mode_and_predictions_equal_the_dense_engines():
    W = random_graph(200, 0)
    pairs = probit_pairs(200, 600, 0)
    prior = S.latent_prior(blocks=[S.laplacian_precision(W, beta=1.0, iota=1.5, weight=3.0)])
    fit = S.mode(prior, pairs)
    ref = laplace.fit(laplacian_covariance(W, 1.0, 1.5, 3.0), pairs, tol=1e-12)
    assert bool(fit.converged)
    np.testing.assert_allclose(fit.mean, ref.mean, atol=1e-8)
    test = probit_pairs(200, 40, 9)
    prob, mean, var = S.pair_predictions(prior, pairs, fit, test)
    want = ref.predict_pairs(test)
    np.testing.assert_allclose(var, want.delta_var, rtol=1e-8)
    np.testing.assert_allclose(mean, want.delta_mean, atol=1e-8)
    np.testing.assert_allclose(prob, want.prob, atol=1e-8)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_xpgp_at_full_rank_equals_the_dense_posterior(seed):
    """Attributes at full rank plus two graphs and an entity effect: the latent-vector engine's
    mode and pair predictions equal the dense engine on the summed covariance to 1e-8."""
    X, kernel, blocks, K, pairs = xpgp_problem(seed=seed)
    root = pivoted_cholesky(kernel, X, len(X))
    prior = S.latent_prior(root.features, blocks)
    fit = S.mode(prior, pairs)
    ref = laplace.fit(K, pairs, tol=1e-12)
    assert bool(fit.converged)
    np.testing.assert_allclose(fit.mean, ref.mean, atol=1e-8)
    test = probit_pairs(len(X), 30, seed + 5)
    prob, mean, var = S.pair_predictions(prior, pairs, fit, test)
    want = ref.predict_pairs(test)
    np.testing.assert_allclose(var, want.delta_var, rtol=1e-8)
    np.testing.assert_allclose(mean, want.delta_mean, atol=1e-8)
    np.testing.assert_allclose(prob, want.prob, atol=1e-8)


def test_bad_pieces_are_refused():
    with pytest.raises(ValueError, match="square"):
        S.laplacian_precision(np.ones((3, 4)))
    with pytest.raises(ValueError, match="symmetric"):
        S.laplacian_precision(np.triu(np.ones((3, 3)), 1))
    with pytest.raises(ValueError, match="iota"):
        S.laplacian_precision(np.zeros((3, 3)), iota=0.0)
    with pytest.raises(ValueError, match=r"entities\[1\] = 7"):
        S.membership_precision([0, 7], [0, 0], 5)
    with pytest.raises(ValueError, match="positive"):
        S.diagonal_precision([1.0, 0.0])
    with pytest.raises(ValueError, match=r"blocks\[0\] has 4 entities"):
        S.latent_prior(np.zeros((5, 2)), [S.diagonal_precision(np.ones(4))])
    with pytest.raises(ValueError, match="needs features"):
        S.latent_prior(np.zeros((5, 0)))


@pytest.mark.slow  # about 6 s
def test_sampled_variances_cover_the_exact_ones_at_their_stated_error():
    """2,000 posterior draws of an XPGP prior at reduced rank: each pair's estimated variance
    within 4.5 of its own standard errors of the exact one (one CG solve per pair, itself checked
    against the dense engine above); the stated error is the draws' rate, ``sqrt(2 / S)``
    relative for a Gaussian difference."""
    X, kernel, blocks, _, pairs = xpgp_problem(seed=2)
    prior = S.latent_prior(pivoted_cholesky(kernel, X, 20).features, blocks)
    fit = S.mode(prior, pairs)
    test = probit_pairs(len(X), 30, 3)
    _, _, exact = S.pair_predictions(prior, pairs, fit, test)
    _, _, var, se = S.sampled_pair_predictions(
        prior, pairs, fit, test, jax.random.key(0), n_samples=2000
    )
    z = (np.asarray(var) - np.asarray(exact)) / np.asarray(se)
    assert np.max(np.abs(z)) < 4.5
    np.testing.assert_allclose(se / var, np.sqrt(2 / 2000), rtol=0.15)


@pytest.mark.slow  # about 9 s
def test_the_evidence_and_its_determinant_agree_with_the_dense_engine_on_n_500():
    """n = 500 entities (attributes at rank 40, two graphs, an entity effect), 1,500 pairs: the
    estimated ``log det H - log det P`` against ``log det(I + K A^T W A)`` (NumPy, on the dense
    ``K`` built by hand) and the evidence against the dense Laplace engine's, each within 4 of
    its stated standard errors for five keys; the stated error (64 probes) is below 2 nats."""
    X, kernel, blocks, _, pairs = xpgp_problem(n=500, m=1500, seed=4)
    root = pivoted_cholesky(kernel, X, 40)
    prior = S.latent_prior(root.features, blocks)
    Phi = np.asarray(root.features)
    W1, W2 = random_graph(500, 5, 3), random_graph(500, 6, 2)
    K = (
        Phi @ Phi.T
        + laplacian_covariance(W1, 1.0, 1.5, 2.0)
        + laplacian_covariance(W2, 0.5, 1.0, 1.0)
        + 0.3 * np.eye(500)
    )
    fit = S.mode(prior, pairs)
    ref = laplace.fit(K, pairs, tol=1e-12)
    np.testing.assert_allclose(fit.mean, ref.mean, atol=1e-8)
    A = np.zeros((len(pairs), 500))
    A[np.arange(len(pairs)), pairs[:, 0]] = 1.0
    A[np.arange(len(pairs)), pairs[:, 1]] = -1.0
    _, want_logdet = np.linalg.slogdet(np.eye(500) + K @ (A.T * np.asarray(fit.w)) @ A)
    for k in range(5):
        ev = S.log_evidence(prior, pairs, fit, jax.random.key(k))
        assert 0 < float(ev.se) < 2.0
        got = float(ev.logdet_h - ev.logdet_p)
        assert abs(got - want_logdet) < 4 * 2 * float(ev.se)
        assert abs(float(ev.log_z) - float(ref.log_evidence)) < 4 * float(ev.se)


def test_the_normalized_membership_form_is_the_hypergraph_laplacian():
    """``normalize``: each group weighs ``1 / s_g``, so ``W_ij = sum_g [i, j in g] / s_g``, by
    hand; ``Q``'s condition number is at most ``1 + iota^2 (groups per entity)``."""
    rng = np.random.default_rng(5)
    n = 30
    entities, groups = rng.integers(0, n, 90), rng.integers(0, 4, 90)
    W = np.zeros((n, n))
    for g in range(4):
        members = sorted(set(entities[groups == g].tolist()))
        for a in members:
            for b in members:
                W[a, b] += (a != b) / len(members)
    Q = S.membership_precision(entities, groups, n, beta=1.2, iota=1.5, normalize=True)
    want = np.linalg.inv(laplacian_covariance(W, 1.2, 1.5, 1.0))
    np.testing.assert_allclose(Q.dense(), want, atol=1e-12)
    per_entity = max(len(set(groups[entities == i].tolist())) for i in range(n))
    assert np.linalg.cond(want) <= 1 + 1.5**2 * per_entity + 1e-9


@pytest.mark.slow
def test_the_model_face_equals_the_dense_laplace_fit_at_full_rank():
    """``XPGPModel(approximation="sparse")`` on an XPGP prior (RBF attributes, a regularized
    Laplacian relation with its weight, an entity effect, sigma != 1/sqrt 2) at rank ``n``: the
    mean, pair predictions and evidence equal ``inference="laplace"``'s dense fit."""
    import jax.numpy as jnp

    from bayesrank import PreferenceProblem, XPGPModel
    from bayesrank.kernels import XPGP, Independent, RegularizedLaplacian

    rng = np.random.default_rng(7)
    n = 120
    X = rng.normal(size=(n, 3))
    W = random_graph(n, 8, 3).toarray()
    prior = XPGP(RBF(1.0, 0.7), (RegularizedLaplacian(beta=1.3, iota=1.2),),
                 jnp.array([0.9, 1.4]), sigma=0.8, entity=Independent(0.4))  # fmt: skip
    problem = PreferenceProblem.create(probit_pairs(n, 400, 7), X=X, relations=[W])
    dense = XPGPModel(prior, inference="laplace", tol=1e-12).fit(problem)
    sparse = XPGPModel(prior, inference="laplace", approximation="sparse", rank=n).fit(problem)
    np.testing.assert_allclose(sparse.mean, dense.mean, atol=1e-8)
    test = probit_pairs(n, 50, 8)
    got, want = sparse.predict_pairs(test), dense.predict_pairs(test)
    np.testing.assert_allclose(got.delta_var, want.delta_var, rtol=1e-7)
    np.testing.assert_allclose(got.prob, want.prob, atol=1e-8)
    ev = sparse.result.evidence()
    assert abs(float(ev.log_z) - float(dense.log_evidence)) < 4 * float(ev.se)
    assert list(sparse.rank()) == list(np.lexsort((np.arange(n), -np.asarray(dense.mean))))
    assert sparse.result.residual < 1e-8
    low = XPGPModel(prior, inference="laplace", approximation="sparse", rank=10).fit(problem)
    Ka = 0.9**2 / (2 * 0.8**2) * np.asarray(RBF(1.0, 0.7)(X))
    Phi = np.asarray(low.result.latent.features)
    np.testing.assert_allclose(low.result.residual, np.trace(Ka - Phi @ Phi.T), rtol=1e-8)


def test_the_model_face_refuses_what_it_does_not_do():
    from bayesrank import PreferenceProblem, XPGPModel
    from bayesrank.kernels import XPGP, Diffusion

    problem = PreferenceProblem.create(probit_pairs(10, 20, 0), X=np.eye(10))
    prior = XPGP(RBF(), ())
    with pytest.raises(ValueError, match="inference='laplace' only"):
        XPGPModel(prior, approximation="sparse").fit(problem)
    with pytest.raises(ValueError, match="approximation"):
        XPGPModel(prior, inference="laplace", approximation="low").fit(problem)
    with pytest.raises(ValueError, match="learns by its evidence"):
        XPGPModel(prior, inference="laplace", approximation="sparse").fit(
            problem, learn_hyperparameters="em"
        )
    graph = PreferenceProblem.create(probit_pairs(10, 20, 0), relations=[np.ones((10, 10))])
    with pytest.raises(ValueError, match=r"relations\[0\].*Diffusion"):
        XPGPModel(XPGP(None, (Diffusion(),)), inference="laplace", approximation="sparse").fit(
            graph
        )


@pytest.mark.slow
def test_a_sparse_posterior_saves_and_loads(tmp_path):
    """``save`` / ``load`` round trip of ``approximation="sparse"``: the same mean, pair
    predictions (CG and sampled, the key kept) and evidence; the summary has no evidence (an
    estimate that costs a run)."""
    import jax.numpy as jnp

    from bayesrank import PreferenceProblem, XPGPModel, load, save
    from bayesrank.io import load_metadata
    from bayesrank.kernels import XPGP, Independent, RegularizedLaplacian

    rng = np.random.default_rng(3)
    n = 60
    X = rng.normal(size=(n, 2))
    W = random_graph(n, 4, 3).toarray()
    prior = XPGP(RBF(1.0, 0.7), (RegularizedLaplacian(),), jnp.array([1.0, 1.2]),
                 entity=Independent(0.5))  # fmt: skip
    problem = PreferenceProblem.create(probit_pairs(n, 200, 3), X=X, relations=[W])
    model = XPGPModel(prior, inference="laplace", approximation="sparse", rank=20)
    posterior = model.fit(problem, key=jax.random.key(5))
    save(posterior, tmp_path / "m.npz")
    back = load(tmp_path / "m.npz")
    assert load_metadata(tmp_path / "m.npz")["summary"]["log_evidence"] is None
    np.testing.assert_array_equal(back.mean, posterior.mean)
    test = probit_pairs(n, 30, 4)
    np.testing.assert_array_equal(back.predict_pairs(test).prob, posterior.predict_pairs(test).prob)
    many = probit_pairs(n, 2100, 5)
    np.testing.assert_array_equal(back.predict_pairs(many).delta_var,
                                  posterior.predict_pairs(many).delta_var)  # fmt: skip
    assert float(back.result.evidence().log_z) == float(posterior.result.evidence().log_z)


@pytest.mark.slow
def test_auto_is_dense_up_to_its_size_and_sparse_beyond(monkeypatch):
    """``approximation="auto"``: the dense result class up to ``AUTO_DENSE_UP_TO`` entities,
    the sparse one beyond (the threshold lowered here to keep the problem small)."""
    import bayesrank.model as M
    from bayesrank import PreferenceProblem, XPGPModel
    from bayesrank.inference.sparse import SparsePosterior
    from bayesrank.kernels import XPGP

    problem = PreferenceProblem.create(probit_pairs(30, 60, 1), X=np.eye(30)[:, :4])
    model = XPGPModel(XPGP(RBF(), ()), inference="laplace", approximation="auto", rank=30)
    assert not isinstance(model.fit(problem).result, SparsePosterior)
    monkeypatch.setattr(M, "AUTO_DENSE_UP_TO", 29)
    auto = model.fit(problem)
    assert isinstance(auto.result, SparsePosterior)
    dense = XPGPModel(XPGP(RBF(), ()), inference="laplace", tol=1e-12).fit(problem)
    np.testing.assert_allclose(auto.mean, dense.mean, atol=1e-8)
    # the default engine, EP, has no sparse form: "auto" gives way to the sparse Laplace and
    # says so, rather than failing where it should switch
    with pytest.warns(UserWarning, match=r"EP\(.*\) has no form without an n x n matrix, so "
                      r"this fit uses SparseLaplace\(rank=30"):  # fmt: skip
        by_ep = XPGPModel(XPGP(RBF(), ()), approximation="auto", rank=30).fit(problem)
    assert isinstance(by_ep.result, SparsePosterior)
    np.testing.assert_allclose(by_ep.mean, dense.mean, atol=1e-8)


def test_inference_sparse_names_the_spelling_that_works():
    from bayesrank import XPGPModel
    from bayesrank.kernels import XPGP

    with pytest.warns(DeprecationWarning), pytest.raises(ValueError) as error:
        XPGPModel(XPGP(RBF(), ()), inference="sparse").engine
    assert "XPGPModel(prior, SparseLaplace(rank=256))" in str(error.value)


@pytest.mark.slow  # 3 s or more in the fast loop
def test_exact_up_to_and_n_samples_choose_how_pair_variances_are_predicted():
    """``SparseLaplace(exact_up_to, n_samples)``: up to ``exact_up_to`` pairs, each variance by
    its own CG solve (``pair_predictions``); beyond, or always at ``exact_up_to=0``, from
    ``n_samples`` draws (``sampled_pair_predictions`` with the posterior's key); bad values are
    refused, naming the setting."""
    import jax

    from bayesrank import PreferenceProblem, SparseLaplace, XPGPModel
    from bayesrank.inference.sparse import pair_predictions, sampled_pair_predictions
    from bayesrank.kernels import XPGP

    problem = PreferenceProblem.create(probit_pairs(30, 60, 1), X=np.eye(30)[:, :4])
    test = probit_pairs(30, 5, 2)
    for exact_up_to, n_samples, exact in ((100, 200, True), (4, 20, False)):
        engine = SparseLaplace(rank=30, exact_up_to=exact_up_to, n_samples=n_samples)
        post = XPGPModel(XPGP(RBF(), ()), engine).fit(problem).result
        got = post.predict_pairs(test).delta_var
        if exact:
            want = pair_predictions(post.latent, post.pairs, post.fit, test)[2]
        else:
            key = jax.random.wrap_key_data(post.key)
            want = sampled_pair_predictions(post.latent, post.pairs, post.fit, test, key,
                                            n_samples=n_samples)[2]  # fmt: skip
        np.testing.assert_allclose(got, want, rtol=1e-10)
    for bad, name in (({"exact_up_to": -1}, "exact_up_to"), ({"n_samples": 1}, "n_samples")):
        with pytest.raises(ValueError, match=name):
            SparseLaplace(**bad)
