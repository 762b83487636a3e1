"""The one batching path: many queries, padded to bucketed shapes, mapped with the single-query
functions.

Every function of bayesrank computes for ONE query; this module runs them over a collection:

1. **pad and bucket** (``bayesrank.data.batch``): problems are stacked to common shapes with
   masks (padded entities get a decoupled unit prior, padded pairs a zero site, so a padded
   problem gives exactly the unpadded answer), at sizes from
   ``bucket_size`` so that collections of similar sizes reuse
   compiled programs; collections of very different sizes are split into size buckets (EP
   costs ``n^3``: padding every query to the largest wastes most of the work);
2. **map over the query axis** (``map_queries``): the single-query function, ``vmap``-ped on
   accelerators and ``lax.map``-ped (one query after another, inside the same compiled program)
   on the CPU, where batched LAPACK calls are slow and, run concurrently, can deadlock jaxlib
   0.10's CPU thread pool (``docs/development/implementation.md``). ``query_map_method``
   says which is used.

3. **shard over devices and processes** (``sharding``, ``distributed``): a collection
   runs as one compiled program (``program``) over a one-axis mesh of every device of every
   process; ``plan`` groups the queries by size and deals each group's queries evenly over
   the devices, each process placing only the queries it read.

Learning (``bayesrank.learning``) builds its shared and per-query objectives on these pieces;
the collection façades (``fit_predict``, ``fit_ep``, ``sample_nuts``,
``letor_metrics``, ``fit_ranksvm``, ...) are the ones users call. Modules (the query map is
``bayesrank.querymap``, a lower layer): ``batching`` (stacked problems, covariances), ``plan``,
``sharding``, ``distributed``, ``program`` (the collection's compiled program),
``collection`` (EP, prediction, NUTS, metrics), ``baselines`` (RankSVM, RankBoost,
pairwise errors per query). ``docs/guide/devices.md``: how to run on many devices and hosts;
``docs/results/scaling.md``: what it measured.
"""

from __future__ import annotations

from ..querymap import map_queries, query_map_method
from .baselines import fit_rankboost, fit_ranksvm, pairwise_errors
from .batching import PreparedBatch, covariances, prepare_batch, size_groups
from .collection import (
    CollectionPrediction,
    fit_ep,
    fit_predict,
    letor_metrics,
    predict_pairs,
    sample_nuts,
)
from .distributed import initialize, process_share
from .plan import CollectionPlan, make_plan
from .sharding import query_mesh

__all__ = [
    "CollectionPlan",
    "CollectionPrediction",
    "PreparedBatch",
    "covariances",
    "fit_ep",
    "fit_predict",
    "fit_rankboost",
    "fit_ranksvm",
    "initialize",
    "letor_metrics",
    "make_plan",
    "map_queries",
    "pairwise_errors",
    "predict_pairs",
    "prepare_batch",
    "process_share",
    "query_map_method",
    "query_mesh",
    "sample_nuts",
    "size_groups",
]
