"""Label ranking: learning a map from instances ``x`` to total orders of ``c`` fixed labels.

Rankings are label ORDERS, ``(n, c)`` int arrays whose row ``i`` lists the labels ``0..c-1``
from the most to the least preferred for instance ``i`` (``orders_to_positions`` gives each
label's position, 0 = top).

Modules:

* ``metrics``: Kendall's tau ``(C - D) / (c(c-1)/2)`` and distance ``D`` between orders, per
  instance and averaged.
* ``logistic``: L2-penalised logistic regression by damped Newton in pure JAX (vmap-able).
* ``rpc``: ranking by pairwise comparison (Fürnkranz & Hüllermeier 2003; Hüllermeier et al.
  2008): one logistic model per label pair, weighted voting. Estimator ``RPC``.
* ``constraint``: constraint classification (Har-Peled, Roth & Zimak 2002): one linear utility
  per label learned from the pairwise constraints in the expanded ``c d``-dimensional space.
  Estimator ``ConstraintClassification``.
* ``gp``: the Gaussian-process label ranker (Chu & Ghahramani 2005): XPGP's probit pairs on
  (instance, label) entities under a product kernel, with ``P(a before b | x)``. Estimator
  ``GPLabelRanker``.
* ``data``: the iris / wine benchmarks built from classification data with naive Bayes, as
  Cheng, Hühn & Hüllermeier (2009) build them.

The estimators follow scikit-learn's conventions (``__init__`` stores parameters, learned
attributes end in ``_``, ``fit(X, rankings)`` returns ``self``, ``score`` is the mean tau);
scikit-learn itself is needed only by ``data``.
"""

from . import constraint, data, gp, logistic, metrics, rpc
from .constraint import ConstraintClassification
from .data import load_label_ranking, naive_bayes_orders
from .gp import GPLabelRanker
from .logistic import fit_logistic
from .metrics import (
    label_kendall_distance,
    label_kendall_tau,
    mean_label_kendall_tau,
    orders_to_positions,
    positions_to_orders,
)
from .rpc import RPC, voting_orders

__all__ = [
    "RPC",
    "ConstraintClassification",
    "GPLabelRanker",
    "constraint",
    "data",
    "fit_logistic",
    "gp",
    "label_kendall_distance",
    "label_kendall_tau",
    "load_label_ranking",
    "logistic",
    "mean_label_kendall_tau",
    "metrics",
    "naive_bayes_orders",
    "orders_to_positions",
    "positions_to_orders",
    "rpc",
    "voting_orders",
]
