"""What the experiment tests share: an experiment run as the command line runs it, its
``results.json`` read as strict JSON, the figure's presence, and the references by hand that
several experiments' checks use (Eq. 13-14's pair probability, the pair error)."""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json

import numpy as np
import pytest
from scipy.special import ndtr

from bayesrank.data.sample import load_sample, sample_path
from bayesrank.experiments import EXPERIMENTS

SAMPLE = {q.qid: q for q in load_sample()}


def strict(text: str):
    """``json.loads`` that fails on ``NaN``/``Infinity`` (not strict JSON)."""

    def refuse(name):
        raise AssertionError(f"results.json holds {name}: not strict JSON")

    return json.loads(text, parse_constant=refuse)


def parse(name, *argv, data_dir=None, seed=0, out=None) -> argparse.Namespace:
    """The experiment's options from ``argv``, with the common ones the command line adds."""
    parser = argparse.ArgumentParser()
    EXPERIMENTS[name].add_arguments(parser)
    args = parser.parse_args([str(a) for a in argv])
    args.data_dir, args.out, args.seed = data_dir, out, seed
    return args


def run(name, out, *argv, data_dir=None, seed=0, **extra):
    """``run`` of experiment ``name`` as the command line calls it (``extra``: keyword
    arguments of ``run`` itself): ``(results, results.json or None)``."""
    args = parse(name, *argv, data_dir=data_dir, seed=seed, out=out)
    results = EXPERIMENTS[name].run(args, **extra)
    written = None if out is None else strict((out / "results.json").read_text())
    return results, written


def assert_figure(path):
    """The PNG is there exactly when matplotlib is installed."""
    assert path.is_file() == (importlib.util.find_spec("matplotlib") is not None)


def median_rho(X):
    """The median heuristic by a double loop: ``1 / median`` of the nonzero distances."""
    d = [np.linalg.norm(X[i] - X[j]) for i in range(len(X)) for j in range(i + 1, len(X))]
    return 1.0 / np.median([x for x in d if x > 0])


def gaussian_probs(mean, cov, pairs):
    """Eq. 13-14 by hand: ``Phi(dmu / sqrt(1 + dvar))``."""
    i, j = pairs[:, 0], pairs[:, 1]
    dvar = cov[i, i] + cov[j, j] - 2 * cov[i, j]
    return ndtr((mean[i] - mean[j]) / np.sqrt(1 + dvar))


def pair_error(p_winner):
    """Errors where ``P(winner) < 1/2``, half one where it is exactly 1/2."""
    p = np.asarray(p_winner)
    return float(np.mean(p < 0.5) + 0.5 * np.mean(p == 0.5))


def write_letor(path, qids):
    """The bundled sample's lines of ``qids`` as a plain LETOR file."""
    with gzip.open(sample_path(), "rt", newline="") as f:
        lines = [x for x in f if x.split()[1].removeprefix("qid:") in qids]
    path.write_text("".join(lines))


def assert_user_error(name, folder, argv, data_dir, match):
    """Experiment ``name`` run from ``folder`` (the test's working directory) with ``argv`` and
    ``--data-dir``: a ``ValueError`` matching ``match``, and no output folder written.
    ``data_dir`` ``"bad"`` is a file that is not LETOR; ``"empty"`` an empty folder."""
    (folder / "bad.txt").write_text("this is not LETOR\n")
    (folder / "empty").mkdir(exist_ok=True)
    data = {"bad": folder / "bad.txt"}.get(data_dir, data_dir)
    with pytest.raises(ValueError, match=match):
        run(name, folder / "out", *argv, data_dir=data)
    assert not (folder / "out").exists()
