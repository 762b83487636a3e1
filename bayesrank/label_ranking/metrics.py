"""Kendall's tau and distance between label rankings (total orders), as label ranking measures
them (Hüllermeier, Fürnkranz, Cheng & Brinker 2008, Sec. 6; Cheng, Hühn & Hüllermeier 2009).

For two total orders of the same ``c`` labels, a pair of labels ``{a, b}`` is *concordant* when
both put ``a`` before ``b`` or both put ``b`` before ``a``, *discordant* otherwise. With ``C`` and
``D`` their numbers (``C + D = c(c-1)/2``)::

    d_K  = D                                    (Kendall distance: the inverted pairs)
    tau  = (C - D) / (c(c-1)/2) = 1 - 4 d_K / (c(c-1))

so ``tau = 1`` for equal orders and ``-1`` for reversed ones. The lecture notes' ``d_K`` counts
unordered pairs, as here; the Italian slides' ``K(R_a, R_b)`` sums over ordered pairs ``(i, j)``,
``i != j``, so it counts each discordant pair twice, and their ``tau = 4P / (n(n-1)) - 1`` with
``P = C`` is the same tau. A data set's score is the plain mean of the per-instance tau.

For total orders tau is tau-a = tau-b (no ties), so it equals ``scipy.stats.kendalltau`` and
``bayesrank.metrics.kendall_tau`` applied to the label *positions* of the two rankings (tested);
it is computed here from the orders directly, vectorised over instances.

Rankings are ORDERS (``(n, c)``, row ``i`` lists the labels from most to least preferred);
``orders_to_positions`` gives the inverse permutation (``pos[i, label]``, 0 = top), and, being an
inversion, also turns positions back into orders. The functions are pure JAX (jit- and
vmap-able); concrete inputs are checked on the host first.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import jit
from ._checks import check_orders

__all__ = [
    "label_kendall_distance",
    "label_kendall_tau",
    "mean_label_kendall_tau",
    "orders_to_positions",
    "positions_to_orders",
]


def _checked(orders, name):
    """``orders`` as a JAX int array, checked (``check_orders``) unless it is being traced; one
    row ``(c,)`` is checked as ``(1, c)`` and keeps its shape."""
    if isinstance(orders, jax.core.Tracer):
        return orders
    if isinstance(orders, list | tuple):
        one_row = len(orders) > 0 and not isinstance(orders[0], list | tuple | np.ndarray)
    else:
        one_row = np.ndim(orders) == 1
    if one_row:
        return jnp.asarray(check_orders([orders], name)[0])
    return jnp.asarray(check_orders(orders, name))


def _pair(orders_true, orders_pred):
    t = _checked(orders_true, "orders_true")
    p = _checked(orders_pred, "orders_pred")
    if t.shape != p.shape:
        raise ValueError(
            f"orders_true has shape {tuple(t.shape)} but orders_pred has {tuple(p.shape)}"
        )
    return t, p


def orders_to_positions(orders):
    """The positions of the labels: ``pos[i, orders[i, k]] = k`` (0 = most preferred).

    Args:
      orders: ``(n, c)`` (or ``(c,)``) permutations of ``0..c-1``, most preferred label first.

    Returns:
      ``(n, c)`` (or ``(c,)``) int array, the inverse permutation of each row.

    Raises:
      ValueError: (concrete input) as ``check_orders``, naming the first row that is ragged or
        not a permutation.
    """
    return jnp.argsort(_checked(orders, "orders"), axis=-1)


def positions_to_orders(positions):
    """The orders from label positions (``positions[i, label]``, 0 = top): the inverse
    permutation again, ``(n, c) -> (n, c)`` (or ``(c,) -> (c,)``).

    Raises:
      ValueError: (concrete input) as ``check_orders``, naming the first row that is ragged or
        not a permutation.
    """
    return jnp.argsort(_checked(positions, "positions"), axis=-1)


def label_kendall_distance(orders_true, orders_pred):
    """Kendall distance ``d_K``: the number of label pairs the two orders rank differently.

    Args:
      orders_true, orders_pred: ``(n, c)`` orders (row: labels from most to least preferred).

    Returns:
      ``(n,)`` int array of discordant pairs, in ``[0, c(c-1)/2]``.

    Raises:
      ValueError: for shapes that differ, or naming the first row that is not a permutation.
    """
    return _discordant(*_pair(orders_true, orders_pred))


@jit
def _discordant(t, p):
    pt, pp = orders_to_positions(t), orders_to_positions(p)
    st = jnp.sign(pt[..., :, None] - pt[..., None, :])
    sp = jnp.sign(pp[..., :, None] - pp[..., None, :])
    # Each unordered pair appears twice among the ordered pairs (a, b), a != b.
    return jnp.sum(st * sp < 0, axis=(-2, -1)) // 2


def label_kendall_tau(orders_true, orders_pred):
    """Kendall's tau between two total orders of the same labels, per instance.

    ``tau = (C - D) / (c(c-1)/2) = 1 - 4 d_K / (c(c-1))`` (module docstring).

    Args:
      orders_true, orders_pred: ``(n, c)`` orders (row: labels from most to least preferred).

    Returns:
      ``(n,)`` floating tau in ``[-1, 1]`` (the default float dtype).

    Raises:
      ValueError: as ``label_kendall_distance``.
    """
    d = label_kendall_distance(orders_true, orders_pred)
    n_pairs = np.shape(orders_true)[-1] * (np.shape(orders_true)[-1] - 1) // 2
    # (N - 2D) / N: an exact integer over N, one rounding (so tau = 0 is exactly 0).
    return (n_pairs - 2 * d).astype(jnp.result_type(float)) / n_pairs


def mean_label_kendall_tau(orders_true, orders_pred):
    """The mean over instances of ``label_kendall_tau``: ``(n, c), (n, c) -> ()``."""
    return jnp.mean(label_kendall_tau(orders_true, orders_pred))
