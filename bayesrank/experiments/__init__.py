"""The experiments as package code, one home each: ``bayesrank experiment NAME`` runs them, and
the scripts in ``experiments/`` are front ends for the full-data runs.

``relational`` (a subpackage: ``bayesrank.experiments.relational``) is the relational study of
Kersting & Xu (2009, Sec. 6) with its controls; ``StudyConfig`` is its protocol, from the
bundled sample (the command's default) to the full study over three collections (no
``--protocol``: its defaults follow the collection). The seven experiments below are each one
implementation with two protocols: ``--protocol reduced`` (the default: the bundled OHSUMED
sample, about a minute at most) and ``--protocol full`` (the full-data study whose results are
in ``docs/results/``; ``experiments/<script>.py`` runs it on ``../shared/data``). An option
given explicitly overrides its protocol's value.

Each spells its protocol in one shape (``protocol``): a frozen dataclass of its settings
(a ``protocol.Protocol``; ``StudyConfig`` is one too), ``PRESETS = {"reduced": ..., "full":
...}`` of it, ``--protocol`` added by ``protocol.add_protocol_argument``, and the run's settings
built by ``protocol.from_args`` (the preset, every option given in its place) before the
study's own checks (``ValueError`` naming the option).

=================  ==========================================================================
``active``         ``active``: active exploration, variance ratio / mutual information /
                   random questions, the pair error on held-out pairs after each answer
``baselines``      ``baselines``: RankSVM and RankBoost, LETOR's MAP, NDCG@k and P@k on
                   held-out queries (or a LETOR fold folder's test set)
``ep-vs-nuts``     ``ep_vs_nuts``: EP against NUTS at fixed hyperparameters, per held-out
                   pair, with NUTS's Monte Carlo standard error
``inference``      ``inference``: EP and Laplace (and NUTS) with learned hyperparameters:
                   pair error, log-likelihood, calibration
``labels``         ``labels``: ties or grades against pairs alone at equal labelling cost
``label-ranking``  ``label_ranking``: RPC, constraint classification and the GP label ranker
                   on iris and wine (Kendall tau by cross-validation; scikit-learn's data)
``large``          ``large``: XPGP on all 10,197 HetRec movies as one problem without a dense
                   matrix, against choix, the dense engine and the attributes alone (needs
                   ``--data-dir``: HetRec is not bundled)
=================  ==========================================================================

Each module has the same face, which the command line wires up::

    NAME: str                                   # the subcommand
    HELP: str                                   # its line in --help
    add_arguments(parser) -> None               # the protocol's own options
    run(args) -> dict                           # the results (also results.json)

``run`` also reads the common options ``args.data_dir`` (a LETOR file or folder; None = the
bundled sample), ``args.out`` (a folder, created; None = write nothing) and ``args.seed``. It
prints a summary table on stdout and a ``[i/N] stage (t s)`` line per stage on stderr, writes
``results.json`` (strict JSON), ``table.txt`` and ``<name>.png``, and expects
float64 (``jax_enable_x64``, which the command line sets). User errors raise ``ValueError``
naming the option or file. From Python::

    import argparse
    from bayesrank.experiments import EXPERIMENTS

    experiment = EXPERIMENTS["active"]
    parser = argparse.ArgumentParser()
    experiment.add_arguments(parser)
    args = parser.parse_args(["--k", "5"])
    args.data_dir, args.out, args.seed = None, None, 0
    results = experiment.run(args)

The modules import only NumPy and their siblings at import time (NumPyro, SciPy and matplotlib
load inside ``run``).
"""

from __future__ import annotations

from . import active, baselines, ep_vs_nuts, inference, label_ranking, labels, large

#: The experiments by subcommand name.
EXPERIMENTS = {
    m.NAME: m for m in (active, baselines, ep_vs_nuts, inference, label_ranking, labels, large)
}

__all__ = [
    "EXPERIMENTS",
    "active",
    "baselines",
    "ep_vs_nuts",
    "inference",
    "label_ranking",
    "labels",
    "large",
]
