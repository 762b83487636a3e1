"""``bayesrank experiment baselines``: bayesrank's RankSVM and RankBoost (and, where installed,
the peers XGBoost and LightGBM) scored the LETOR way: MAP, NDCG@1..k, P@1..k
(``bayesrank.evaluation.evaluate_queries``, the official conventions; every query counts, one
without a relevant document as 0).

One protocol, two presets of its options (``--protocol``; any option given overrides its
preset's value):

* ``reduced`` (the default; seconds on the bundled sample): RankSVM at ``--C 1``, RankBoost at
  ``--rounds 300``;
* ``full`` (the LETOR protocol; ``experiments/letor_baselines.py`` runs it on
  ``../shared/data``, about 7 minutes on two cores): every method of ``METHODS``, ``C`` in
  1e-7, 1e-6, ..., 1e-1, ``T`` in 10, 25, 50, 100, 200, 300, 500, 25, 50, 100 or 200 trees,
  each chosen on ``vali`` by MAP, on the five folds of OHSUMED (LETOR 3.0, QueryLevelNorm) and
  MQ2008 (LETOR 4.0) under ``--data-dir``, the means over the folds beside the published LETOR
  3.0 figures (OHSUMED).

The data decide how a model meets its test queries:

* **the bundled sample, a LETOR file, or a folder of LETOR files**: ``--folds`` query folds
  (default 5: on the five-query sample, leave one query out), query ``i`` in fold
  ``i mod folds`` in file order; each fold's queries are scored by models trained on the other
  folds' queries, so every query is scored once, by a model that never saw it. There is no
  validation set: every value of a grid is reported, none chosen;
* **a LETOR fold folder** (``train``, ``test`` and optionally ``vali``, ``.txt.gz`` or
  ``.txt``): trained on ``train`` (all pairs within each query), scored on ``test``; with
  ``vali`` and several values the value with the best ``vali`` MAP is chosen (the first on
  ties), else every value is reported;
* **a collection folder** (``Fold1``, ``Fold2``, ... folders; ``--letor-folds`` picks some), or
  ``--collection OHSUMED MQ2008`` under ``--data-dir`` (``OHSUMED/QueryLevelNorm/FoldN``,
  ``MQ2008/FoldN``; the full preset's default where ``--data-dir`` is neither a fold nor a
  collection folder): each fold as above, then per collection the mean over its folds of each
  fold's mean (LETOR's figures).

Methods (``methods``; the cores of ``bayesrank.baselines`` compiled in ``_programs``):
``RankSVM`` (``ranksvm.fit_linear``: linear, squared hinge, ``C`` multiplying the *sum* of the
pair losses, warm-started along the grid of ``C``), ``RankSVM-hinge`` (the hinge loss,
SVMlight's objective), ``RankBoost`` (``rankboost.fit``: threshold weak rankers and their
complements, ``--n-thresholds`` evenly spaced candidates per feature; a grid of ``T`` is the
prefixes of one run), ``RankBoost-RankLib`` (only ``[x > theta]``, RankLib's class),
``XGBoost`` (``rank:pairwise``, depth 6, learning rate 0.1) and ``LightGBM`` (``lambdarank``,
31 leaves, learning rate 0.05) with ``--trees`` trees. The last two are peers from the ``bench``
extra, imported only when they run: named in ``--methods``, a peer that does not import is a
``ValueError`` saying what to install; in the full preset's list it is skipped with a line on
stderr and in ``results.json``'s ``skipped``.

Reported (``results.json``): ``runs`` (one per fold folder, or the one query-fold run), each
with its splits, test queries and rows: per method and value the mean metrics, each query's,
the vali MAP of every value, the fit's diagnostics and seconds, and each test query's scores (so
that anything can be recomputed); ``summary``, per collection the mean over its folds and the
value chosen in each; versions. ``table.txt`` (printed): MAP, NDCG and P at 1, 3, 5, 10;
``table.md``: the Markdown tables of ``docs/results/baselines.md`` (MAP, NDCG@1..10, P@1..10,
published rows, chosen values); ``baselines.png``: NDCG@k against k, mean over the test
queries, band +- one standard error.
"""

from .methods import METHODS, PEERS
from .protocol import COLLECTIONS, PRESETS, PROTOCOLS, BaselinesProtocol, add_arguments
from .runner import run

NAME = "baselines"
HELP = (
    "RankSVM, RankBoost, SortNet, PRank, XPGP (and XGBoost, LightGBM): MAP, NDCG@k, P@k on "
    "held-out queries or LETOR folds (--protocol full: the LETOR protocol)"
)

__all__ = [
    "COLLECTIONS",
    "HELP",
    "METHODS",
    "NAME",
    "PEERS",
    "PRESETS",
    "PROTOCOLS",
    "BaselinesProtocol",
    "add_arguments",
    "run",
]
