"""``bayesrank experiment active``: active preference exploration (Kersting & Xu 2009, Sec. 5,
Fig. 4): pairs chosen by the model against pairs chosen at random, from no known pair.

One protocol, two presets (``--protocol``); any option given overrides its preset's value:

============  ===========================  ==============================================
option        ``reduced`` (the default)    ``full`` (``experiments/active.py``)
============  ===========================  ==============================================
collection    ``letor``: the bundled        ``OHSUMED`` (``--collection``: ``MQ2008``,
              sample, or ``--data-dir``'s   ``MovieLens``; ``--data-dir`` the benchmark
              LETOR file or folder          data's folder)
queries       5, the first in file order    10, chosen at random (seeded)
min-pairs     20                            200
k             10                            50
repeats       5                             20
models        GP+entity                     XPGP (OHSUMED, MovieLens), GP+entity, GP
============  ===========================  ==============================================

Both: every criterion (the paper's variance ratio, BALD's mutual information, random), EP
updates (``--engine laplace``), test fraction 1/2. ``--collection sample`` is the bundled
sample with its keyword graph (XPGP runs on it in seconds).

The protocol:

* **queries**: those with at least ``--min-pairs`` labelled pairs, ``--queries`` of them:
  ``letor`` the first in file order; the collections as the relational study chooses them
  (``relational.collections.load_collection``, seeded by ``--seed``): OHSUMED (LETOR 3.0
  QueryLevelNorm Fold1) with its keyword graph, MQ2008 (LETOR 4.0, S1-S5) with no relation,
  HetRec MovieLens users with at least 60 rated movies (``--max-movies`` of them drawn per
  user), star ratings as grades, 27 movie attributes, relations co-director and co-genre;
* **pairs**: every pair implied by a query's grades; a random ``--test-fraction`` of them
  (seeded by ``--seed`` and the query) are **test pairs**, never asked; the others are the
  **candidates**, each shown in a random orientation and answered by the grades;
* **priors** (fixed, not learned): an RBF kernel (``kappa = 1``, ``rho`` by the median
  heuristic on the query's documents), unit weights; ``XPGP`` adds a regularized Laplacian of
  each relation and an independent per-document effect of scale 0.1, ``GP+entity`` the
  effect alone, ``GP`` a 1e-6 jitter;
* **loop**: ``--k`` candidates asked one at a time by each criterion (random: ``--repeats``
  runs), the posterior updated after each answer;
* **measures**: the pair error on the test pairs after each answer (``P(winner) < 1/2`` an
  error, ``= 1/2`` half one; ``k = 0`` is the prior alone, whose zero mean puts every test pair
  at 1/2: error exactly 1/2), and the AUC (``bayesrank.metrics.pairwise_auc``) of the final
  posterior; per criterion, the queries where its error is below random's mean at ``k = 10``
  (the paper's Fig. 4 point) and at ``--k``.

The test pairs are fixed and disjoint from the candidates, so every criterion is measured on
the same pairs at every ``k``. (The paper's protocol, and this study's full script before it
moved here, measured on the pairs not yet asked, a set that each criterion shrinks in its own
way, or on all labelled pairs, the asked ones included.)

Each (prior, criterion) is one ``bayesrank.active.explore_queries`` call, every query and
repetition in one compiled program per size group.

Reported (``results.json``): per prior (``models``) and criterion the curve ``k = 0..K`` of
every query (random: the mean of its repetitions, and each repetition) and their mean over
queries, the final AUC likewise, and the pairs asked (winner first); the queries (size, pairs,
``rho``, relations) and their test pairs; the table: the mean curve at a few ``k``, the AUC,
the counts below random, each query's error at ``K``; the figure (``active.png``): one panel
per prior, ``bayesrank.plot.learning_curves`` of the per-query curves, band +- one standard
error over queries.
"""

from __future__ import annotations

from .protocol import (
    COLLECTIONS,
    CRITERIA,
    ENGINES,
    MODELS,
    PRESETS,
    PROTOCOLS,
    ActiveProtocol,
    add_arguments,
)
from .runner import NAME, run

HELP = "active exploration: variance ratio, mutual information and random questions"

__all__ = [
    "COLLECTIONS",
    "CRITERIA",
    "ENGINES",
    "HELP",
    "MODELS",
    "NAME",
    "PRESETS",
    "PROTOCOLS",
    "ActiveProtocol",
    "add_arguments",
    "run",
]
