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
