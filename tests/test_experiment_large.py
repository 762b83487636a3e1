"""``bayesrank experiment large`` on HetRec (the shared data), at small sizes, and the pooled
pairs it is built on."""

from __future__ import annotations

import numpy as np
import pytest
from experiment_helpers import run

from bayesrank.data.movielens import pooled_pairs


def test_pooled_pairs_by_hand():
    """Two users; equal ratings give no pair; winners first; entity indices of ``movie_ids``."""
    ratings = {7: {30: 4.0, 10: 2.0, 20: 4.0}, 3: {20: 1.0, 40: 5.0}}
    pairs, users = pooled_pairs(ratings, [40, 30, 20, 10])
    got = sorted(zip(users.tolist(), map(tuple, pairs.tolist()), strict=True))
    assert got == [(3, (0, 2)), (7, (1, 3)), (7, (2, 3))]
    with pytest.raises(ValueError, match="user 3 rated movie 40"):
        pooled_pairs(ratings, [30, 20, 10])


@pytest.mark.shared_data
@pytest.mark.slow  # HetRec's 2.3 million pooled pairs, EM, a dense subset
def test_large_on_hetrec(shared_data, tmp_path, monkeypatch):
    """The counts against the ratings counted here; at a rank of at least the dense subset's
    size the sparse prior is exact there, so both engines' held-out errors are equal (the sign
    of a pair's mean decides it) and their log-likelihoods within the sampled variances' error;
    EM raises the XPGP model's evidence; the missing data folder is named. choix is hidden, as
    in CI (it is a bench extra; 10,197 items cost it a minute whatever the pairs)."""
    import sys

    from bayesrank.data.movielens import user_ratings

    monkeypatch.setitem(sys.modules, "choix", None)
    results, written = run(
        "large", tmp_path, "--n-train", 3000, "--n-test", 1000, "--rank", 300, "--samples", 16,
        "--probes", 8, "--dense-sizes", 300, "--dense-pairs", 2000, "--em-steps", 6,
        data_dir=shared_data,
    )  # fmt: skip
    ratings = user_ratings(shared_data)
    want = 0
    for r in ratings.values():
        values = np.array(list(r.values()))
        want += sum(int(np.sum(values > v)) for v in values)
    s = written["settings"]
    assert s["pooled_pairs"] == want and s["n_movies"] == 10197
    compared = {m for r in ratings.values() for m, v in r.items() if set(r.values()) - {v}}
    assert s["rated_movies"] == len(compared)
    sub = results["subsets"][0]
    assert sub["n"] == 300 and 100 < sub["train_pairs"] <= 2000
    assert sub["sparse"]["error"] == sub["dense"]["error"]
    assert abs(sub["sparse"]["log_likelihood"] - sub["dense"]["log_likelihood"]) < 0.01
    # EP on the same prior and pairs: another approximation of the same posterior
    assert sub["dense_ep"]["converged"]
    assert abs(sub["dense_ep"]["log_likelihood"] - sub["dense"]["log_likelihood"]) < 0.01
    models = results["models"]
    assert models["XPGP, EM"]["log_evidence"] > models["XPGP"]["log_evidence"]
    assert models["XPGP, evidence"]["log_evidence"] > models["XPGP"]["log_evidence"]
    assert models["choix"] is None and "choix" in written["models"]
    for name in ("XPGP", "attributes"):
        assert 0.1 < models[name]["error"] < 0.4 and models[name]["converged"]
    with pytest.raises(ValueError, match="--data-dir"):
        run("large", None)


def test_placebo_memberships_keep_group_sizes_and_break_identity():
    from bayesrank.experiments.large_entities import placebo_memberships

    entities = np.array([0, 1, 2, 3, 4, 5, 6, 7])
    groups = np.array([0, 0, 0, 1, 1, 2, 2, 2])
    out = placebo_memberships({"r": (entities, groups)}, 50, seed=3)["r"]
    np.testing.assert_array_equal(out[1], groups)  # the same groups, the same sizes
    assert len(set(out[0].tolist())) == 8 and out[0].max() < 50  # distinct movies
    assert not np.array_equal(out[0], entities)
    again = placebo_memberships({"r": (entities, groups)}, 50, seed=3)["r"]
    np.testing.assert_array_equal(out[0], again[0])  # seeded


def test_held_out_pairs_draw_without_replacement_in_order():
    import jax

    from bayesrank.data.pairs import pairs_from_grades
    from bayesrank.data.study import split_entities
    from bayesrank.experiments.large_entities import held_out_pairs

    pairs = pairs_from_grades(np.arange(40) % 5)
    split = split_entities(jax.random.PRNGKey(0), pairs, 40, held_out=8, keep=(0, 2))
    some = held_out_pairs(split, 30, seed=1)
    rows = [tuple(r) for r in split.test.tolist()]
    index = [rows.index(tuple(r)) for r in some.tolist()]
    assert len(some) == 30 and index == sorted(set(index))
    assert held_out_pairs(split, 10**6, seed=1) is split.test


@pytest.mark.shared_data
@pytest.mark.slow  # HetRec's 2.3 million pooled pairs, four sparse models at two settings
def test_large_entity_split_on_hetrec(shared_data, tmp_path, monkeypatch):
    """``--split entities``: the split is ``split_entities``'s on the pooled pairs (its sizes
    recomputed here from the data), every model fits at every ``j``, and the placebo is not
    the XPGP model (its relations are permuted)."""
    import sys

    import jax

    from bayesrank.data.study import split_entities
    from bayesrank.experiments.large import load

    monkeypatch.setitem(sys.modules, "choix", None)
    results, written = run(
        "large", tmp_path, "--split", "entities", "--n-train", 3000, "--n-test", 800,
        "--held-out", 60, "--keep", 0, 3, "--rank", 32, "--samples", 16, "--probes", 4,
        data_dir=shared_data,
    )  # fmt: skip
    ids, _, pairs, _ = load(shared_data)
    split = split_entities(jax.random.PRNGKey(0), pairs, len(ids), held_out=60, keep=(0, 3),
                           n_known=3000)  # fmt: skip
    s = written["settings"]
    assert s["held_out_movies"] == 60 and s["n_test"] == min(800, len(split.test))
    assert s["train_pairs"] == {"0": 3000, "3": len(split.known[3])}
    assert 3000 < len(split.known[3]) <= 3000 + 3 * 60
    for j in ("0", "3"):
        rows = results["entity_split"][j]
        assert rows["choix"] is None
        for name in ("XPGP", "placebo", "attributes + entity", "attributes"):
            assert rows[name]["converged"] and 0.05 < rows[name]["error"] < 0.5
        assert rows["XPGP"]["log_likelihood"] != rows["placebo"]["log_likelihood"]
        assert 0.05 < rows["RankSVM"]["error"] < 0.5


@pytest.mark.shared_data
@pytest.mark.slow  # HetRec's 2.3 million pooled pairs, four sparse models learned and fitted
def test_large_entity_split_learns_each_models_prior(shared_data, tmp_path, monkeypatch):
    """``--split entities --learn`` (one SQUAREM cycle, no lengthscale search: the search and
    its accuracy are ``test_sparse_learning``'s): each GP model learns its own scales (XPGP and
    the placebo four, attributes + entity two, attributes one) on the smallest ``j``'s pairs,
    each ends above its start's evidence, and each model's fit at ``j = 0`` is at its learned
    prior: its evidence (same pairs, key and probes) is the learning's own, and the placebo's
    prior is not XPGP's."""
    import sys

    from bayesrank.experiments import large_entities

    monkeypatch.setitem(sys.modules, "choix", None)
    monkeypatch.setattr(
        large_entities,
        "LEARN",
        {"max_steps": 3, "n_probes": 4, "search_range": 1.0},
    )
    results, written = run(
        "large", tmp_path, "--split", "entities", "--learn", "--n-train", 3000, "--n-test", 800,
        "--held-out", 60, "--keep", 0, "--rank", 32, "--samples", 16, "--probes", 4,
        data_dir=shared_data,
    )  # fmt: skip
    assert written["settings"]["learned"]
    learning = results["learning"]
    sizes = {"XPGP": 4, "placebo": 4, "attributes + entity": 2, "attributes": 1}
    for name, size in sizes.items():
        row = learning[name]
        assert len(row["variances"]) == size and row["factors"] == [1.0]
        assert not row["start_kept"] and row["log_evidence"] > row["start_log_evidence"]
        fitted = results["entity_split"]["0"][name]
        assert fitted["converged"]
        assert fitted["log_evidence"] == pytest.approx(row["log_evidence"], rel=1e-6)
    assert learning["XPGP"]["variances"] != learning["placebo"]["variances"]
