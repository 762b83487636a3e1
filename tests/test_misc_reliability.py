"""Issue 49, the miscellaneous faces: old import paths, label rankings, the CLI's files, PRank.

References are the tests' own: the table of moved names is read from the git history (``git log
-S``), label rankings are judged by ``sorted(row) == list(range(c))`` in plain Python, the CLI's
files are parsed with ``csv``/``json``/``float``, PRank is rerun in exact rational arithmetic.
"""

import importlib
import warnings

import pytest

# ---------------------------------------------------------------------------------------------
# Old import paths: (old module, name, new module), from the history of the last weeks.
MOVED = [
    ("bayesrank.data.letor", "read_scores", "bayesrank.data.scores"),
    ("bayesrank.baselines.ranksvm", "RankSVM", "bayesrank.baselines.svm_estimator"),
    ("bayesrank.learning", "PreparedBatch", "bayesrank.parallel.batching"),
    ("bayesrank.learning", "covariances", "bayesrank.parallel.batching"),
    ("bayesrank.learning", "prepare_batch", "bayesrank.parallel.batching"),
    ("bayesrank.learning", "size_buckets", "bayesrank.data.batch"),
    ("bayesrank.learning", "touched_entities", "bayesrank.data.batch"),
    ("bayesrank.active.loop", "explore", "bayesrank.active.collection"),
    ("bayesrank.threads", "one_blas_thread", "bayesrank.runtime"),
    ("bayesrank.parallel.mapping", "map_queries", "bayesrank.querymap"),
    ("bayesrank.parallel.mapping", "query_map_method", "bayesrank.querymap"),
    *(
        ("bayesrank.active.designs.optimize", name, "bayesrank.active.designs.search")
        for name in ("Proposal", "best_in_pool", "maximize", "mixed")
    ),
    *(
        ("bayesrank.study", name, "bayesrank.experiments.relational")
        for name in (
            "COLLECTIONS",
            "DEFAULT_KNOWN",
            "FULL_STUDY",
            "StudyConfig",
            "load_collection",
            "markdown",
            "model_names",
            "run_all",
            "run_study",
            "table",
            "write",
        )
    ),
    *(
        ("bayesrank.inference.ep", name, f"bayesrank.inference.ep.{new}")
        for name, new in (
            ("EP_ADVICE", "fit"),
            ("MAX_ITER_LIMIT", "settings"),
            ("MIN_DAMPING", "state"),
            ("MIXED_SWITCH", "precision"),
            ("check_settings", "settings"),
            ("check_sites", "host"),
            ("informative_pairs", "sites"),
            ("loop_settings", "host"),
            ("pad_pairs", "host"),
            ("pseudo_data_precision", "evidence"),
            ("site_natural_parameters", "sites"),
            ("site_precision", "sites"),
            ("unpad_posterior", "host"),
            ("validate_problem", "host"),
        )
    ),
    ("bayesrank.inference.ep", "prior_root", "bayesrank.linalg"),
    ("bayesrank.inference.ep", "psd_root", "bayesrank.linalg"),
]


@pytest.mark.parametrize(("old", "name", "new"), MOVED, ids=[f"{o}.{n}" for o, n, _ in MOVED])
def test_an_old_import_path_still_works_with_a_deprecation_warning(old, name, new):
    with pytest.warns(DeprecationWarning, match=rf"{old}\.{name} moved to {new}\.{name}"):
        got = getattr(importlib.import_module(old), name)
    assert got is getattr(importlib.import_module(new), name)


def test_from_import_of_an_old_path_and_unknown_names():
    with pytest.warns(DeprecationWarning, match="bayesrank.data.scores"):
        from bayesrank.data.letor import read_scores
    from bayesrank.data.scores import read_scores as new

    assert read_scores is new
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unknown name warns nothing
        with pytest.raises(AttributeError, match="no attribute 'nope'"):
            importlib.import_module("bayesrank.data.letor").nope
        with pytest.raises(ImportError):
            from bayesrank.study import nope  # noqa: F401
