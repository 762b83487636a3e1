"""What the experiment commands share (``bayesrank.experiments``): the registry the command line
reads, reading a LETOR folder, strict JSON. Each experiment's own tests, end to end on the
bundled sample against references computed independently, and the errors a user can cause, are
in ``test_experiment_<name>.py``.
"""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from experiment_helpers import write_letor

from bayesrank.experiments import EXPERIMENTS, _common


def test_registry():
    assert set(EXPERIMENTS) == {
        "active", "baselines", "ep-vs-nuts", "inference", "label-ranking", "labels", "large",
    }  # fmt: skip
    for name, module in EXPERIMENTS.items():
        assert module.NAME == name and module.HELP and "\n" not in module.HELP
        assert callable(module.add_arguments) and callable(module.run)


def test_load_queries_folder(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    write_letor(folder / "b.txt", {"7"})
    with gzip.open(folder / "a.txt.gz", "wt") as f:
        f.write("1 qid:1 1:0.5 # docid = x\n0 qid:1 2:0.25\n")  # two features only
    queries, _ = _common.load_queries(folder)
    assert [q.qid for q in queries] == ["1", "7"]  # by file name
    assert {q.n_features for q in queries} == {45}  # padded to one width
    assert queries[0].X[0, 0] == 0.5 and np.all(queries[0].X[:, 2:] == 0)
    write_letor(folder / "test.txt", {"10"})
    write_letor(folder / "train.txt", {"12"})
    assert [q.qid for q in _common.load_queries(folder)[0]] == ["12", "10"]  # a fold: train first


def test_strict_json(tmp_path):
    with pytest.raises(ValueError, match=r"\['rows'\]\[1\]\['MAP'\] is not a finite number"):
        _common.strict_json({"rows": [{"MAP": 0.5}, {"MAP": float("nan")}]})
    with pytest.raises(ValueError, match="not a finite"):
        _common.write_outputs({"x": float("inf")}, tmp_path / "o", "table", None, "x")
    assert not (tmp_path / "o").exists()  # nothing written
