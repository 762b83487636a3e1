"""RankSVM: against independent references (scipy on the explicit pairwise-difference primal and
dual, scikit-learn's LinearSVC), KKT conditions, implicit gradients vs finite differences,
jit / vmap / loop agreement, no retracing, and the estimator's validation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

from bayesrank.baselines import RankSVM, ranksvm
from bayesrank.data.letor import load_letor
from bayesrank.data.pairs import pairs_from_grades

needs_x64 = pytest.mark.skipif(not jax.config.jax_enable_x64, reason="float64 references")

C = 0.7
STATIC = ("loss", "tol", "max_iter", "smoothing")
fit_linear = jax.jit(ranksvm.fit_linear, static_argnames=STATIC)
fit_kernel = jax.jit(ranksvm.fit_kernel, static_argnames=STATIC)


def problem(seed=0, n_queries=4, per_query=10, d=5):
    """Documents of several queries, grades {0, 1, 2}, and the within-query pairs (a loop)."""
    rng = np.random.default_rng(seed)
    n = n_queries * per_query
    X = rng.normal(size=(n, d))
    qid = np.repeat(np.arange(n_queries), per_query)
    y = (X @ rng.normal(size=d) + rng.normal(size=n) > 0).astype(int) + (X[:, 0] > 1)
    pairs = [(i, j) for i in range(n) for j in range(n) if qid[i] == qid[j] and y[i] > y[j]]
    return X, y, qid, np.array(pairs)


def primal(w, A, C, loss):
    r = np.maximum(0.0, 1.0 - A @ w)
    return 0.5 * w @ w + C * np.sum(r**2 if loss == "squared_hinge" else r)


def scipy_squared_hinge(A, C):
    """The seed tutorial's construction: a linear SVM on the difference vectors, no intercept."""
    f = lambda w: primal(w, A, C, "squared_hinge")  # noqa: E731
    g = lambda w: w - 2 * C * A.T @ np.maximum(0.0, 1.0 - A @ w)  # noqa: E731
    res = minimize(f, np.zeros(A.shape[1]), jac=g, method="BFGS", options={"gtol": 1e-11})
    return res.x


def scipy_hinge_dual(A, C):
    """The seed notes' dual QP (box 0 <= alpha <= C, C on the sum), by L-BFGS-B; w = A' alpha."""
    Q = A @ A.T
    f = lambda a: 0.5 * a @ Q @ a - a.sum()  # noqa: E731
    g = lambda a: Q @ a - 1.0  # noqa: E731
    res = minimize(
        f,
        np.zeros(len(A)),
        jac=g,
        method="L-BFGS-B",
        bounds=[(0, C)] * len(A),
        options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10000},
    )
    return A.T @ res.x


@needs_x64
def test_squared_hinge_matches_scipy_on_pairwise_differences():
    X, _, _, pairs = problem()
    A = X[pairs[:, 0]] - X[pairs[:, 1]]
    sol = fit_linear(X, pairs, C)
    assert bool(sol.info.converged)
    w_ref = scipy_squared_hinge(A, C)
    w = np.asarray(sol.w)
    assert primal(w, A, C, "squared_hinge") <= primal(w_ref, A, C, "squared_hinge") + 1e-10
    np.testing.assert_allclose(w, w_ref, atol=1e-6)
    np.testing.assert_allclose(float(sol.info.objective), primal(w, A, C, "squared_hinge"))


@pytest.mark.slow  # 3 s or more in the fast loop
@needs_x64
def test_kkt_conditions_squared_hinge_and_hinge():
    X, _, _, pairs = problem(1)
    A = X[pairs[:, 0]] - X[pairs[:, 1]]
    # squared hinge: w = sum_p alpha_p dx_p with alpha_p = 2 C max(0, 1 - margin_p)
    w = np.asarray(fit_linear(X, pairs, C).w)
    alpha = 2 * C * np.maximum(0.0, 1.0 - A @ w)
    np.testing.assert_allclose(w, A.T @ alpha, atol=1e-9)
    # hinge (Huber width h): alpha_p in [0, C]; = 0 above margin 1 + h, = C below 1 - h
    h = 1e-4
    w = np.asarray(fit_linear(X, pairs, C, loss="hinge", smoothing=h).w)
    margin = A @ w
    alpha = np.clip(C * (1 + h - margin) / (2 * h), 0, C)  # the smoothed loss's derivative
    np.testing.assert_allclose(w, A.T @ alpha, atol=1e-8)
    assert np.all(alpha[margin > 1 + h] == 0) and np.all(alpha[margin < 1 - h] == C)
    # the dual reconstruction from margins alone (hinge subgradient) agrees off the margin band
    off = np.abs(margin - 1) > h
    np.testing.assert_allclose(
        np.asarray(ranksvm.dual_variables(margin, C, "hinge"))[off], alpha[off]
    )


@pytest.mark.slow  # 3 s or more in the fast loop
@needs_x64
def test_hinge_objective_matches_scipy_dual_qp():
    X, _, _, pairs = problem(2)
    A = X[pairs[:, 0]] - X[pairs[:, 1]]
    h = 1e-4
    sol = fit_linear(X, pairs, C, loss="hinge", smoothing=h)
    ours = primal(np.asarray(sol.w), A, C, "hinge")
    ref = primal(scipy_hinge_dual(A, C), A, C, "hinge")
    # the Huber-smoothed optimum is within C m h / 4 of the hinge optimum
    assert ours <= ref + C * len(A) * h / 4 + 1e-6
    assert ref <= ours + 1e-6 * abs(ours)  # and the reference is a real optimum


@needs_x64
def test_linear_svc_on_the_pairwise_transform():
    """The bench-extra peer: scikit-learn's LinearSVC (squared hinge, no intercept) on the seed
    tutorial's balanced pairwise transform. Skipped where scikit-learn is absent (CI: the scipy
    reference above is the CI-run version of this check)."""
    svm = pytest.importorskip("sklearn.svm")
    X, _, _, pairs = problem(3)
    A = X[pairs[:, 0]] - X[pairs[:, 1]]
    flip = np.where(np.arange(len(A)) % 2 == 0, 1.0, -1.0)  # balanced classes, same objective
    clf = svm.LinearSVC(C=C, loss="squared_hinge", fit_intercept=False, tol=1e-10, max_iter=100000)
    clf.fit(A * flip[:, None], flip)
    w = np.asarray(fit_linear(X, pairs, C).w)
    ref = primal(clf.coef_.ravel(), A, C, "squared_hinge")
    assert primal(w, A, C, "squared_hinge") <= ref + 1e-9


@needs_x64
@pytest.mark.slow
def test_kernel_ranksvm_linear_kernel_gives_linear_solution_and_rbf_matches_scipy():
    X, _, _, pairs = problem(4)
    for loss in ("squared_hinge", "hinge"):
        w = np.asarray(fit_linear(X, pairs, C, loss=loss).w)
        beta = np.asarray(fit_kernel(X @ X.T, pairs, C, loss=loss).beta)
        np.testing.assert_allclose(X.T @ beta, w, atol=1e-7)
    K = np.asarray(ranksvm.rbf_kernel(X, X, 0.2)) + 1e-8 * np.eye(len(X))
    sol = fit_kernel(K, pairs, C)
    i, j = pairs.T

    def f(b):
        s = K @ b
        return 0.5 * b @ s + C * np.sum(np.maximum(0.0, 1.0 - s[i] + s[j]) ** 2)

    def g(b):
        s = K @ b
        v = 2 * C * np.maximum(0.0, 1.0 - s[i] + s[j])
        gf = np.zeros(len(b))
        np.add.at(gf, i, -v)
        np.add.at(gf, j, v)
        return K @ (b + gf)

    ref = minimize(f, np.zeros(len(X)), jac=g, method="BFGS", options={"gtol": 1e-10})
    assert float(sol.info.objective) <= ref.fun + 1e-9
    np.testing.assert_allclose(K @ np.asarray(sol.beta), K @ ref.x, atol=1e-4)


@needs_x64
@pytest.mark.slow
def test_gradients_in_C_and_X_match_finite_differences():
    X, _, _, pairs = problem(5)
    score = lambda X, C: jnp.sum(jnp.sin(X @ fit_linear(X, pairs, C).w))  # noqa: E731
    gX, gC = jax.grad(score, argnums=(0, 1))(jnp.asarray(X), C)
    eps = 1e-6
    fd_C = (score(X, C + eps) - score(X, C - eps)) / (2 * eps)
    np.testing.assert_allclose(gC, fd_C, rtol=1e-5)
    for r, c in [(0, 0), (7, 3), (21, 1)]:
        E = np.zeros_like(X)
        E[r, c] = eps
        fd = (score(X + E, C) - score(X - E, C)) / (2 * eps)
        np.testing.assert_allclose(gX[r, c], fd, rtol=1e-5, atol=1e-9)

    # kernel version: gradient in the RBF width through K
    def kscore(gamma):
        K = ranksvm.rbf_kernel(X, X, gamma)
        return jnp.sum(K @ ranksvm.fit_kernel(K, pairs, C).beta)

    kscore = jax.jit(kscore)
    fd = (kscore(0.2 + eps) - kscore(0.2 - eps)) / (2 * eps)
    np.testing.assert_allclose(jax.jit(jax.grad(kscore))(0.2), fd, rtol=1e-5)


@pytest.mark.slow
@needs_x64
def test_jit_vmap_loop_agree_with_padding_and_no_retrace():
    X, y, qid, _ = problem(6, n_queries=2, per_query=8)
    per_query = []
    for q in range(2):
        rows = np.flatnonzero(qid == q)
        Xq, yq = X[rows], y[rows]
        per_query.append((Xq, np.argwhere(yq[:, None] > yq[None, :])))
    m_pad = max(len(p) for _, p in per_query) + 3
    Ps = np.zeros((2, m_pad, 2), int)
    masks = np.zeros((2, m_pad), bool)
    for b, (_, p) in enumerate(per_query):
        Ps[b, : len(p)] = p
        masks[b, : len(p)] = True
    Xs = np.stack([x for x, _ in per_query])
    traces = []

    def fit(X, P, M, C):
        traces.append(1)
        return ranksvm.fit_linear(X, P, C, M).w

    batched = jax.jit(jax.vmap(fit, in_axes=(0, 0, 0, None)))(Xs, Ps, masks, C)
    for b, (Xq, p) in enumerate(per_query):
        loop = fit_linear(Xq, p, C).w
        np.testing.assert_allclose(batched[b], loop, atol=1e-10)
    jitted = jax.jit(fit)
    jitted(Xs[0], Ps[0], masks[0], C)
    n = len(traces)
    jitted(Xs[1], Ps[1], masks[1], 2 * C)  # same shapes: no new trace
    assert len(traces) == n


@pytest.mark.slow
@needs_x64
def test_estimator_fit_predict_and_single_document_query():
    X, y, qid, pairs = problem(7)
    X = np.vstack([X, np.ones((1, X.shape[1]))])  # a query with one document: no pairs
    y, qid = np.append(y, 2), np.append(qid, 99)
    est = RankSVM(C=C).fit(X, y, qid)
    assert est.pairs_.shape == pairs.shape and est.converged_
    np.testing.assert_allclose(est.coef_, fit_linear(X[:-1], pairs, C).w, atol=1e-10)
    np.testing.assert_allclose(est.predict(X[:3]), X[:3] @ est.coef_)
    rbf = RankSVM(C=C, kernel="rbf", gamma=0.2).fit(X, y, qid)
    assert rbf.predict(X).shape == (len(X),) and rbf.converged_


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (lambda X, y, q: (X, y[:-1], q), r"y has shape \(39,\)"),
        (lambda X, y, q: (X, y, q[:-1]), r"qid has shape \(39,\)"),
        (
            lambda X, y, q: (np.where(np.arange(X.size).reshape(X.shape) == 17, np.nan, X), y, q),
            r"X\[3, 2\] = nan",
        ),
        (lambda X, y, q: (X, np.where(np.arange(len(y)) == 4, np.inf, y), q), r"y\[4\] = inf"),
    ],
)
def test_bad_input_names_the_item(args, match):
    X, y, qid, _ = problem(8)
    with pytest.raises(ValueError, match=match):
        RankSVM().fit(*args(X, y, qid))


def test_bad_settings():
    X, y, qid, _ = problem(8)
    with pytest.raises(ValueError, match="C must be"):
        RankSVM(C=-1.0).fit(X, y, qid)
    with pytest.raises(ValueError, match="loss must be"):
        RankSVM(loss="logistic").fit(X, y, qid)
    with pytest.raises(ValueError, match="not fitted"):
        RankSVM().predict(X)
    with pytest.raises(ValueError, match="has 4 features"):
        RankSVM().fit(X, y, qid).predict(X[:, :4])


@pytest.mark.slow  # 3 s or more in the fast loop
def test_float32_converges_to_the_float64_solution():
    """float32 (its default tol 1e-4) against the float64 solve (or the scipy reference)."""
    X, _, _, pairs = problem(9)
    sol = fit_linear(X.astype(np.float32), pairs, C)
    assert sol.w.dtype == np.float32 and bool(sol.info.converged)
    A = X[pairs[:, 0]] - X[pairs[:, 1]]
    np.testing.assert_allclose(sol.w, scipy_squared_hinge(A, C), rtol=1e-3, atol=1e-4)


@needs_x64
@pytest.mark.shared_data
@pytest.mark.slow
def test_matches_scipy_on_an_ohsumed_query(shared_data):
    q = load_letor(shared_data / "OHSUMED" / "QueryLevelNorm" / "Fold1" / "vali.txt.gz")[0]
    pairs = pairs_from_grades(q.grades)
    A = q.X[pairs[:, 0]] - q.X[pairs[:, 1]]
    sol = fit_linear(q.X, pairs, 1e-2)
    assert bool(sol.info.converged)
    ref = primal(scipy_squared_hinge(A, 1e-2), A, 1e-2, "squared_hinge")
    assert primal(np.asarray(sol.w), A, 1e-2, "squared_hinge") <= ref * (1 + 1e-10)
