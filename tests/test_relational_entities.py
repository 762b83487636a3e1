"""The relational study's entity-level split (``split="entities"``): the study's splits are
``data.study.split_entities``'s, every setting of a repetition predicts the same test pairs,
the entity effect alone gives a pair of two unseen entities exactly 1/2, and bad settings are
named; end to end in a child process and from the command line."""

import json

import jax
import numpy as np
import pytest

from bayesrank.data.pairs import pairs_from_grades
from bayesrank.data.study import StudyQuery, split_entities, write_study_dir
from bayesrank.experiments.relational import StudyConfig, run_study
from bayesrank.experiments.relational.runner import splits_of


def _collection(folder, queries=2, n=24):
    rng = np.random.default_rng(1)
    out = []
    for q in range(queries):
        X = rng.normal(size=(n, 3))
        grades = np.round(X[:, 0] + 0.5 * rng.normal(size=n), 1)
        W = (rng.uniform(size=(n, n)) < 0.2).astype(float)
        W = np.triu(W, 1) + np.triu(W, 1).T
        out.append(StudyQuery(f"q{q}", X, pairs_from_grades(grades), {"r": W}, grades))
    write_study_dir(folder, out)
    return out


def test_the_study_splits_are_split_entities_with_one_test_set_per_repetition(tmp_path):
    queries = _collection(tmp_path / "data")
    config = StudyConfig(
        collection="dir", data_dir=tmp_path / "data", split="entities", known=(30,), keep=(0, 2, 4)
    )
    assert config.settings == (0, 2, 4) and config.setting_letter == "j"
    for rep in range(2):
        by_j = {j: splits_of(queries, j, config, rep) for j in config.keep}
        for b, q in enumerate(queries):
            key = jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(config.seed), rep), b)
            ref = split_entities(key, q.pairs, q.n, held_out=0.2, keep=(0, 2, 4), n_known=30)
            for j in config.keep:
                known, test = by_j[j][b]
                np.testing.assert_array_equal(known, ref.known[j])
                np.testing.assert_array_equal(test, by_j[0][b][1])  # the same test pairs
    # repetitions re-draw the entities
    held = [splits_of(queries, 0, config, rep)[0][1] for rep in range(3)]
    assert not all(np.array_equal(held[0], h) for h in held[1:])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"known": (10, 20)}, r"split='entities' takes one known .* got \[10, 20\]"),
        ({"keep": ()}, "keep is empty"),
        ({"keep": (1, -2)}, "keep"),
        ({"held_out": 1.5}, r"held_out=1.5 must be a share in \(0, 1\) or a count"),
        ({"held_out": "x"}, "held_out must be a share"),
        ({"split": "users"}, "split"),
    ],
)
def test_bad_entity_split_settings_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        StudyConfig(collection="sample", **{"split": "entities", **kwargs})


def test_the_default_known_is_the_collections_largest():
    assert StudyConfig(collection="sample", split="entities").known == (40,)
    assert StudyConfig(collection="sample").known == (20, 40)


def test_too_many_known_pairs_name_the_query(tmp_path):
    queries = _collection(tmp_path / "data")
    config = StudyConfig(collection="dir", split="entities", known=(10_000,))
    with pytest.raises(ValueError, match=r"query q0: n_known=10000 exceeds"):
        splits_of(queries, 0, config, 0)


@pytest.mark.slow
def test_an_entity_split_study_end_to_end(tmp_path):
    """In a child process (``jobs=1``: the split's settings travel on its command line): every
    setting predicts the same test pairs, their count is the split's, and the entity effect
    alone (choix's model) predicts exactly 1/2 for a pair of two entities without judgements
    (cold start): its error there is 0.5, ties counting half, where XPGP's attributes and
    relations do better than chance."""
    queries = _collection(tmp_path / "data", queries=2, n=30)
    out = tmp_path / "out"
    config = StudyConfig(
        collection="dir",
        data_dir=tmp_path / "data",
        split="entities",
        known=(40,),
        keep=(0, 3),
        held_out=0.3,
        repeats=2,
        models=("XPGP", "Entity", "RankSVM"),
        jobs=1,
        out=out,
    )
    run_study(config, verbose=False)
    results = json.loads((out / "results.json").read_text())
    assert results["split"] == "entities" and set(results["settings"]) == {"0", "3"}
    total = 0
    for rep in range(2):
        key = jax.random.fold_in(jax.random.PRNGKey(0), rep)
        for b, q in enumerate(queries):
            split = split_entities(
                jax.random.fold_in(key, b), q.pairs, q.n, held_out=0.3, keep=(0, 3), n_known=40
            )
            total += len(split.test)
    for j in ("0", "3"):
        for model in ("XPGP", "Entity", "RankSVM"):
            assert sum(results["settings"][j]["summary"][model]["counts"].values()) == total
    cold = results["settings"]["0"]["rows"]
    neither = [r for r in cold["Entity"] if r["count_neither"]]
    assert neither, "the split should give pairs of two held-out entities"
    assert all(r["err_neither"] == 0.5 for r in neither)
    assert results["settings"]["0"]["summary"]["XPGP"]["err_neither"]["mean"] < 0.5
    text = (out / "table.txt").read_text()
    assert "== dir, held-out entities keeping 0 judgements ==" in text
    assert "XPGP vs Entity" in text
    assert (out / "curves.png").is_file()


@pytest.mark.slow
def test_the_command_line_takes_the_entity_split(tmp_path, capsys):
    from bayesrank.cli import main

    _collection(tmp_path / "data", queries=1, n=20)
    code = main(
        [
            "experiment", "relational", "--data-dir", str(tmp_path / "data"), "--split",
            "entities", "--keep", "0", "1", "--held-out", "4", "--known", "20", "--repeats",
            "1", "--models", "PGP+I", "Entity", "--jobs", "0", "--out", str(tmp_path / "out"),
        ]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "held-out entities keeping 1 judgement ==" in printed
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["config"]["held_out"] == "4" and results["config"]["split"] == "entities"
