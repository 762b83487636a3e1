"""``bayesrank.plot``: each figure is written, labelled, and draws the values computed here
independently (NumPy by hand, ``scipy.stats.norm``); bad input raises ``ValueError`` naming it.

Reference: the equations in the functions' docstrings (Eq. 13-14 of Kersting & Xu 2009 for the
pair probability; the ECE of ``bayesrank.metrics.calibration``), recomputed here from scratch.
"""

from __future__ import annotations

import importlib
import json
import re
import sys

import numpy as np
import pytest

mpl = pytest.importorskip("matplotlib")
mpl.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402

norm = pytest.importorskip("scipy.stats").norm

import bayesrank  # noqa: E402
import bayesrank.plot as bp  # noqa: E402
from bayesrank import RBF, XPGP, PreferenceProblem, XPGPModel  # noqa: E402
from bayesrank.metrics import expected_calibration_error  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def written(obj, tmp_path, name="figure.png"):
    """Save ``obj`` (Figure or Axes) as PNG; check a non-empty PNG file is there."""
    path = bp.save(obj, tmp_path / name)
    data = path.read_bytes()
    assert len(data) > 1000 and data[:8] == b"\x89PNG\r\n\x1a\n"
    return path


def labelled(ax):
    assert ax.get_xlabel() and ax.get_ylabel()


def legend_texts(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def band_has(ax, x, y, index=0):
    """Every point ``(x[i], y[i])`` is a vertex of the ``index``-th band (fill_between)."""
    bands = [c for c in ax.collections if not isinstance(c, LineCollection)]
    vertices = np.concatenate([p.vertices for p in bands[index].get_paths()])
    for xi, yi in zip(x, y, strict=True):
        assert np.min(np.hypot(vertices[:, 0] - xi, vertices[:, 1] - yi)) < 1e-9, (xi, yi)


# --- without matplotlib ----------------------------------------------------------------------


def test_import_without_matplotlib_and_call_raises_import_error(monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)  # "import matplotlib..." now fails
    for name in [m for m in sys.modules if m.startswith("bayesrank.plot")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delattr(bayesrank, "plot")  # restored after the test
    fresh = importlib.import_module("bayesrank.plot")
    assert fresh is not bp
    hint = re.escape('pip install "bayesrank[plot]"')
    with pytest.raises(ImportError, match=hint):
        fresh.reliability(np.array([0.2, 0.7]), np.array([0, 1]))
    with pytest.raises(ImportError, match=hint):
        fresh.learning_curves([1, 2], {"a": [0.1, 0.2]})


# --- reliability -----------------------------------------------------------------------------

PROBS = np.array([0.05, 0.15, 0.12, 0.45, 0.55, 0.58, 0.95, 0.99, 1.0, 0.3, 0.33, 0.71])
OUTCOMES = np.array([0, 0, 1, 0, 1, 1, 1, 1, 1, 0, 1, 0])


def by_hand(probs, outcomes, n_bins):
    """Per bin (b = floor(p B), 1.0 in the last): count, mean p, mean outcome; and the ECE."""
    b = np.minimum(np.floor(probs * n_bins).astype(int), n_bins - 1)
    counts = np.bincount(b, minlength=n_bins)
    full = counts > 0
    mp = np.array([probs[b == i].mean() for i in np.flatnonzero(full)])
    mo = np.array([outcomes[b == i].mean() for i in np.flatnonzero(full)])
    ece = np.sum(counts[full] / len(probs) * np.abs(mo - mp))
    return counts, mp, mo, ece


def test_reliability_points_bars_and_ece(tmp_path):
    counts, mp, mo, ece = by_hand(PROBS, OUTCOMES, 5)
    assert ece == pytest.approx(float(expected_calibration_error(PROBS, OUTCOMES, n_bins=5)))
    ax = bp.reliability(PROBS, OUTCOMES, n_bins=5, label="EP")
    labelled(ax)
    (curve,) = [line for line in ax.get_lines() if "ECE" in line.get_label()]
    np.testing.assert_allclose(curve.get_xdata(), mp, rtol=1e-12)
    np.testing.assert_allclose(curve.get_ydata(), mo, rtol=1e-12)
    np.testing.assert_allclose([p.get_height() for p in ax.patches], counts / len(PROBS))
    texts = legend_texts(ax)
    assert f"EP (ECE = {ece:.3f})" in texts and "perfect calibration" in texts
    assert "EP: share of predictions per bin" in texts
    # a second model in the same Axes: one more curve, still one diagonal
    bp.reliability(PROBS[::-1], OUTCOMES.astype(bool), n_bins=5, label="L", counts=False, ax=ax)
    texts = legend_texts(ax)
    assert sum("ECE" in t for t in texts) == 2 and texts.count("perfect calibration") == 1
    written(ax, tmp_path, "reliability.png")


def test_reliability_mask():
    mask = np.arange(len(PROBS)) % 3 != 0
    _, mp, mo, ece = by_hand(PROBS[mask], OUTCOMES[mask], 5)
    ax = bp.reliability(PROBS, OUTCOMES, n_bins=5, mask=mask)
    (curve,) = [line for line in ax.get_lines() if "ECE" in line.get_label()]
    np.testing.assert_allclose(curve.get_xdata(), mp, rtol=1e-12)
    np.testing.assert_allclose(curve.get_ydata(), mo, rtol=1e-12)
    assert curve.get_label() == f"predictions (ECE = {ece:.3f})"


@pytest.mark.parametrize(
    ("probs", "outcomes", "options", "name"),
    [
        (PROBS[:-1], OUTCOMES, {}, "outcomes"),
        (np.where(np.arange(12) == 3, 1.2, PROBS), OUTCOMES, {}, "probs"),
        (np.where(np.arange(12) == 3, np.nan, PROBS), OUTCOMES, {}, "probs"),
        (PROBS, np.where(np.arange(12) == 2, 2, OUTCOMES), {}, "outcomes"),
        (PROBS, np.where(np.arange(12) == 2, 0.5, OUTCOMES), {}, "outcomes"),
        (PROBS, OUTCOMES, {"n_bins": 0}, "n_bins"),
        (PROBS, OUTCOMES, {"mask": np.zeros(12, bool), "n_bins": 5}, "probs"),
        (PROBS, OUTCOMES, {"counts": 1}, "counts"),
    ],
)
def test_reliability_bad_input(probs, outcomes, options, name):
    with pytest.raises(ValueError, match=name):
        bp.reliability(probs, outcomes, **options)
    assert not plt.get_fignums()  # checked before a figure is made


# --- ranked pairs ----------------------------------------------------------------------------

MEAN = np.array([0.3, 1.2, -0.5, 0.9, 0.0])
_A = np.random.default_rng(0).normal(size=(5, 5)) * 0.4
COV = _A @ _A.T + 0.05 * np.eye(5)


def expected_pairs(mean, cov, k, level=0.9):
    """Consecutive pairs of the ranking, Eq. 13-14 and the interval of Phi(delta), by hand."""
    order = np.argsort(-mean, kind="stable")
    i, j = order[:k], order[1 : k + 1]
    dm = mean[i] - mean[j]
    dv = cov[i, i] + cov[j, j] - 2 * cov[i, j]
    z = norm.ppf(0.5 + level / 2)
    prob = norm.cdf(dm / np.sqrt(1 + dv))
    return (i, j), prob, norm.cdf(dm - z * np.sqrt(dv)), norm.cdf(dm + z * np.sqrt(dv))


def drawn_pairs(ax):
    (point,) = [line for line in ax.get_lines() if line.get_label().startswith("P(rank")]
    (bars,) = [c for c in ax.collections if isinstance(c, LineCollection)]
    segments = np.array(bars.get_segments())  # (k, 2, 2): [[x, lo], [x, hi]]
    return point, segments


def test_ranked_pairs_from_mean_and_cov(tmp_path):
    _, prob, lo, hi = expected_pairs(MEAN, COV, 4)
    ax = bp.ranked_pairs(MEAN, COV)
    labelled(ax)
    point, seg = drawn_pairs(ax)
    np.testing.assert_array_equal(point.get_xdata(), [1, 2, 3, 4])
    np.testing.assert_allclose(point.get_ydata(), prob, rtol=1e-12)
    np.testing.assert_allclose(seg[:, 0, 1], lo, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(seg[:, 1, 1], hi, rtol=1e-10)
    np.testing.assert_array_equal(seg[:, 0, 0], [1, 2, 3, 4])
    assert legend_texts(ax) == ["1/2", "90% interval of Phi(delta)", "P(rank r beats rank r + 1)"]
    written(ax, tmp_path, "ranked_pairs.png")


def test_ranked_pairs_top_k_labels_level_and_variances():
    names = ["a", "b", "c", "d", "e"]
    (i, j), prob, lo, hi = expected_pairs(MEAN, np.diag(np.diag(COV)), 2, level=0.5)
    ax = bp.ranked_pairs(MEAN, np.diag(COV), k=2, labels=names, level=0.5)
    labelled(ax)
    point, seg = drawn_pairs(ax)
    np.testing.assert_allclose(point.get_ydata(), prob, rtol=1e-12)
    np.testing.assert_allclose(seg[:, :, 1], np.stack([lo, hi], 1), rtol=1e-10)
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert (
        ticks
        == ["b > d", "d > a"]
        == [f"{names[a]} > {names[b]}" for a, b in zip(i, j, strict=True)]
    )
    assert "50% interval of Phi(delta)" in legend_texts(ax)


@pytest.mark.slow  # 3 s or more in the fast loop
def test_ranked_pairs_from_posterior(tmp_path):
    X = np.random.default_rng(1).normal(size=(6, 2))
    pairs = np.array([[0, 1], [1, 2], [3, 4], [2, 5], [0, 5], [3, 1]])
    post = XPGPModel(XPGP(RBF(1.0, 1.0))).fit(PreferenceProblem.create(pairs, X=X))
    mean, cov = np.asarray(post.mean), np.asarray(post.cov)
    (i, j), prob, lo, hi = expected_pairs(mean, cov, 5)
    ax = bp.ranked_pairs(post, labels=[f"doc{t}" for t in range(6)])
    point, seg = drawn_pairs(ax)
    np.testing.assert_allclose(point.get_ydata(), prob, rtol=1e-9)
    np.testing.assert_allclose(point.get_ydata(), post.predict_pairs(np.stack([i, j], 1)).prob)
    np.testing.assert_allclose(seg[:, :, 1], np.stack([lo, hi], 1), rtol=1e-9, atol=1e-14)
    np.testing.assert_array_equal(np.asarray(post.rank())[:6], np.r_[i, j[-1]])
    written(ax, tmp_path, "ranked_pairs_posterior.png")


class _Post:
    mean, cov = MEAN, COV

    def predict_pairs(self, pairs):
        raise AssertionError("not reached")


@pytest.mark.parametrize(
    ("args", "options", "name"),
    [
        ((MEAN, COV[:4, :4]), {}, "cov"),
        ((MEAN, np.full((5, 5), np.nan)), {}, "cov"),
        ((np.where(np.arange(5) == 1, np.nan, MEAN), COV), {}, "posterior"),
        ((MEAN[:1], COV[:1, :1]), {}, "posterior"),
        ((MEAN, COV), {"k": 0}, "k"),
        ((MEAN, COV), {"k": 5}, "k"),
        ((MEAN, COV), {"labels": ["a", "b"]}, "labels"),
        ((MEAN, COV), {"level": 1.0}, "level"),
        ((MEAN,), {}, "cov"),
        ((_Post(), COV), {}, "cov"),
    ],
)
def test_ranked_pairs_bad_input(args, options, name):
    with pytest.raises(ValueError, match=name):
        bp.ranked_pairs(*args, **options)
    assert not plt.get_fignums()  # checked before a figure is made


# --- learning curves -------------------------------------------------------------------------

X = np.array([1, 2, 4, 8, 16])
RUNS = np.random.default_rng(2).uniform(0.1, 0.5, size=(6, 5))


def test_learning_curves_std_band_tuple_and_run(tmp_path):
    mean, sd = RUNS.mean(0), RUNS.std(0, ddof=1)
    given = (np.linspace(0.4, 0.2, 5), np.full(5, 0.03))
    curves = {"entropy": RUNS, "random": given, "one run": RUNS[0]}
    ax = bp.learning_curves(X, curves, xlabel="questions asked", title="OHSUMED")
    assert ax.get_xlabel() == "questions asked" and ax.get_ylabel() == "pairwise error"
    assert legend_texts(ax) == ["entropy", "random", "one run"]
    lines = ax.get_lines()
    np.testing.assert_allclose(lines[0].get_ydata(), mean, rtol=1e-12)
    np.testing.assert_allclose(lines[1].get_ydata(), given[0])
    np.testing.assert_allclose(lines[2].get_ydata(), RUNS[0])
    band_has(ax, X, mean - sd, 0)
    band_has(ax, X, mean + sd, 0)
    band_has(ax, X, given[0] + given[1], 1)
    assert len(ax.collections) == 2  # the single run has no band
    written(ax, tmp_path, "learning_curves.png")


def test_learning_curves_sem_and_percentile_bands():
    mean, sem = RUNS.mean(0), RUNS.std(0, ddof=1) / np.sqrt(6)
    ax = bp.learning_curves(X, {"EP": RUNS}, band="sem")
    band_has(ax, X, mean - sem)
    band_has(ax, X, mean + sem)
    ax = bp.learning_curves(X, {"EP": RUNS.tolist()}, band=(10, 90))
    band_has(ax, X, np.percentile(RUNS, 10, axis=0))
    band_has(ax, X, np.percentile(RUNS, 90, axis=0))
    ax = bp.learning_curves(X, {"EP": RUNS}, band=None)
    assert not ax.collections


@pytest.mark.parametrize(
    ("x", "curves", "options", "name"),
    [
        (X[:4], {"a": RUNS}, {}, r"curves\['a'\]"),
        (X, {"a": np.where(np.arange(5) == 2, np.nan, RUNS)}, {}, r"curves\['a'\]"),
        (X, {"a": (RUNS[0], -RUNS[1])}, {}, r"curves\['a'\]"),
        (X, {"a": (RUNS[0], RUNS[1], RUNS[2])}, {}, r"curves\['a'\]"),
        (X, {"a": (RUNS[0], RUNS[1])}, {"band": "sem"}, r"curves\['a'\]"),
        (X, {"a": RUNS}, {"band": "var"}, "band"),
        (X, {"a": RUNS}, {"band": (90, 10)}, "band"),
        (X, {}, {}, "curves"),
        ([1, np.inf, 3, 4, 5], {"a": RUNS}, {}, "x"),
    ],
)
def test_learning_curves_bad_input(x, curves, options, name):
    with pytest.raises(ValueError, match=name):
        bp.learning_curves(x, curves, **options)
    assert not plt.get_fignums()  # checked before a figure is made


# --- the relational study ---------------------------------------------------------------------


def fake_results():
    """The structure experiments/relational.py writes: per k, rows per query-repetition and
    their summary (mean, sd ddof 1); RankSVM has no log-probability, PGP no k = 30."""
    rng = np.random.default_rng(3)
    settings = {}
    for k in (30, 10, 20):  # out of order on purpose
        rows, summary = {}, {}
        for model in ("XPGP", "PGP", "RankSVM"):
            if model == "PGP" and k == 30:
                continue
            rows[model] = [
                {
                    "qid": q,
                    "rep": r,
                    "err": float(rng.uniform(0, 0.4)),
                    "auc": float(rng.uniform(0.6, 1)),
                    "loglik": None if model == "RankSVM" else float(-rng.uniform(0.2, 0.7)),
                }
                for q in range(3)
                for r in range(2)
            ]
            summary[model] = {}
            for metric in ("err", "auc", "loglik"):
                v = np.array([row[metric] for row in rows[model] if row[metric] is not None])
                summary[model][metric] = (
                    {"mean": float(v.mean()), "sd": float(v.std(ddof=1))} if len(v) else None
                )
        settings[str(k)] = {"summary": summary, "rows": rows, "comparisons": {}}
    return {"collection": "OHSUMED", "settings": settings}


def test_study_panels_curves_bands_and_legend(tmp_path):
    results = fake_results()
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    fig = bp.study(path)
    written(fig, tmp_path, "study.png")
    assert len(fig.axes) == 2
    for ax, metric, label in zip(fig.axes, ("err", "auc"), ("pairwise error", "AUC"), strict=True):
        assert ax.get_xlabel() == "known pairs" and ax.get_ylabel() == label
        assert ax.get_title() == f"OHSUMED: {label}"
        assert [int(t) for t in ax.get_xticks()] == [10, 20, 30]
        for line, model in zip(ax.get_lines(), ("XPGP", "PGP", "RankSVM"), strict=True):
            ks = [10, 20] if model == "PGP" else [10, 20, 30]
            rows = [results["settings"][str(k)]["rows"][model] for k in ks]
            mean = [np.mean([r[metric] for r in rs]) for rs in rows]
            sd = [np.std([r[metric] for r in rs], ddof=1) for rs in rows]
            assert line.get_label() == model
            np.testing.assert_array_equal(line.get_xdata(), ks)
            np.testing.assert_allclose(line.get_ydata(), mean, rtol=1e-12)
            band_has(ax, ks, np.subtract(mean, sd), ax.get_lines().index(line))
            band_has(ax, ks, np.add(mean, sd), ax.get_lines().index(line))
    assert fig.axes[0].get_legend() is None
    assert legend_texts(fig.axes[1]) == ["XPGP", "PGP", "RankSVM"]


def test_study_metric_models_sem_rows_only_and_given_axes(tmp_path):
    results = fake_results()
    # log-probability: RankSVM reports none, so it is not drawn (nor in the legend)
    fig = bp.study(results, metrics="loglik", band="sem")
    (ax,) = fig.axes
    assert [line.get_label() for line in ax.get_lines()] == ["XPGP", "PGP"]
    assert ax.get_ylabel() == "mean log P(truth)"
    rows = [results["settings"][str(k)]["rows"]["XPGP"] for k in (10, 20, 30)]
    mean = np.array([np.mean([r["loglik"] for r in rs]) for rs in rows])
    sem = np.array([np.std([r["loglik"] for r in rs], ddof=1) / np.sqrt(6) for rs in rows])
    band_has(ax, [10, 20, 30], mean + sem, 0)
    # rows only: the same curves, computed from the rows
    for block in results["settings"].values():
        del block["summary"]
    fig2, axes = plt.subplots(1, 2)
    out = bp.study(results, metrics=("error", "auc"), models=["PGP", "XPGP"], ax=axes)
    assert out is fig2
    assert [line.get_label() for line in axes[0].get_lines()] == ["PGP", "XPGP"]
    err = [np.mean([r["err"] for r in rs]) for rs in rows]
    np.testing.assert_allclose(axes[0].get_lines()[1].get_ydata(), err, rtol=1e-12)
    written(fig2, tmp_path, "study_rows.png")


def test_study_bad_input():
    results = fake_results()
    with pytest.raises(ValueError, match="results"):
        bp.study({"collection": "x"})
    with pytest.raises(ValueError, match="metrics"):
        bp.study(results, metrics=("nope",))
    with pytest.raises(ValueError, match="models"):
        bp.study(results, models=["XPGP", "nobody"])
    with pytest.raises(ValueError, match="band"):
        bp.study(results, band="var")
    assert not plt.get_fignums()  # checked before a figure is made
    with pytest.raises(ValueError, match="ax"):
        bp.study(results, ax=plt.subplots(1, 3)[1])
    with pytest.raises(ValueError, match=r"settings'\]\['x'\]|settings'\] key 'x'"):
        bp.study({"settings": {"x": results["settings"]["10"]}})
    bad = fake_results()
    bad["settings"]["20"]["summary"]["PGP"]["err"]["mean"] = float("nan")
    with pytest.raises(ValueError, match=re.escape("['summary']['PGP']['err']['mean'] = nan")):
        bp.study(bad)
    for block in bad["settings"].values():
        del block["rows"]
    with pytest.raises(ValueError, match="sem"):
        bp.study(bad, metrics="auc", band="sem")


def test_save_accepts_figure_or_axes_and_rejects_others(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    assert written(fig, tmp_path, "a.png") == tmp_path / "a.png"
    written(ax, tmp_path, "b.png")
    with pytest.raises(ValueError, match="fig_or_ax"):
        bp.save("not a figure", tmp_path / "c.png")


def test_study_one_setting_dir_titles_and_ticks(tmp_path):
    """Issue 32: with one number of known pairs the axis read 96-104, and both panels were
    titled just "dir". Read back from the saved figure's Axes: one tick at k, a margin around it,
    the folder's name and the metric in each title."""
    results = fake_results()
    results["settings"] = {"100": results["settings"]["10"]}
    results["collection"] = "dir"
    results["config"] = {"data_dir": str(tmp_path / "my-ratings")}
    fig = bp.study(results)
    written(fig, tmp_path, "one.png")
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["my-ratings (dir): pairwise error", "my-ratings (dir): AUC"]
    for ax in fig.axes:
        assert list(ax.get_xticks()) == [100]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["100"]
        lo, hi = ax.get_xlim()
        assert lo <= 60 and hi >= 140


def test_paired_differences_against_the_reference_by_hand(tmp_path):
    """Each model's mean paired difference to the reference (matched by query and repetition)
    and its 95% t interval, computed here from the rows by hand."""
    from scipy import stats

    results = fake_results()
    fig = bp.paired(results, reference="XPGP", metric="error")
    written(fig, tmp_path, "paired.png")
    (ax,) = fig.axes
    assert ax.get_title() == "paired difference to XPGP: OHSUMED"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["10", "20", "30"]
    containers = ax.containers  # one errorbar per model: PGP, then RankSVM
    assert [c.get_label() for c in containers] == ["PGP", "RankSVM"]
    for container, model in zip(containers, ("PGP", "RankSVM"), strict=True):
        line, _caps, (bars,) = container.lines
        ks = [10, 20] if model == "PGP" else [10, 20, 30]
        expected, halves = [], []
        for k in ks:
            rows = results["settings"][str(k)]["rows"]
            ref = {(r["qid"], r["rep"]): r["err"] for r in rows["XPGP"]}
            d = np.array([r["err"] - ref[(r["qid"], r["rep"])] for r in rows[model]])
            expected.append(d.mean())
            halves.append(stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d)))
        np.testing.assert_allclose(np.asarray(line.get_ydata(), float), expected, rtol=1e-12)
        segments = bars.get_segments()
        np.testing.assert_allclose([s[1][1] - s[0][1] for s in segments], 2 * np.array(halves))
    with pytest.raises(ValueError, match="reference 'PGP\\+I' has no rows"):
        bp.paired(results)
