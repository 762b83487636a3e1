"""``bayesrank experiment label-ranking`` (reduced): the cross-validation as its docstring says
(a seeded partition into folds, each method trained on the others), and its errors."""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pytest

pytest.importorskip("sklearn")  # the data sets are scikit-learn's

from bayesrank.experiments import label_ranking
from bayesrank.label_ranking import RPC, load_label_ranking


def run(*argv, out=None):
    parser = argparse.ArgumentParser()
    label_ranking.add_arguments(parser)
    args = parser.parse_args(list(argv))
    args.data_dir, args.out, args.seed = None, out, 3
    return label_ranking.run(args)


@pytest.mark.slow
def test_the_reduced_protocol_cross_validates_each_method(tmp_path):
    results = run("--folds", "2", out=tmp_path / "lr")
    for name in ("results.json", "table.txt", "label-ranking.png"):
        assert (tmp_path / "lr" / name).stat().st_size > 0
    assert [(r["dataset"], r["method"]) for r in results["rows"]] == [
        ("iris", m) for m in ("RPC", "CC", "GP")
    ]
    for row in results["rows"]:
        assert len(row["tau"]) == 2 and all(-1.0 <= t <= 1.0 for t in row["tau"])
    # RPC's first fold by hand: the seeded permutation's first half is the test fold
    X, orders = load_label_ranking("iris")
    test = np.array_split(np.random.default_rng(3).permutation(len(X)), 2)[0]
    train = np.setdiff1d(np.arange(len(X)), test)
    want = RPC().fit(X[train], orders[train]).score(X[test], orders[test])
    assert results["rows"][0]["tau"][0] == pytest.approx(want, abs=1e-12)
    assert "published" in label_ranking.table(results)


def test_bad_folds_name_the_option():
    with pytest.raises(ValueError, match="--folds"):
        run("--folds", "1")


def test_without_scikit_learn_the_command_says_what_to_install(monkeypatch, tmp_path, capsys):
    """scikit-learn is not a dependency: the command ends in one line naming it (exit 2), not
    a traceback, and writes nothing."""
    from bayesrank.cli import main

    for name in [m for m in sys.modules if m == "sklearn" or m.startswith("sklearn.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "sklearn", None)  # import sklearn: ModuleNotFoundError
    assert main(["experiment", "label-ranking", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bayesrank: error: ") and err.count("\n") == 1
    assert "pip install scikit-learn" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()
