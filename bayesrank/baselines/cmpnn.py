"""CmpNN: the comparator network of SortNet (Rigutini, Papini, Maggini & Scarselli, "SortNet:
learning to rank by a neural preference function", IEEE TNN 22(9), 2011).

A feed-forward network on the pair ``[x, y]`` (``2d`` inputs), one hidden layer of ``2h``
sigmoid units, two sigmoid outputs ``N_>([x, y])`` (evidence of ``x > y``) and ``N_<([x, y])``
(of ``y > x``). Its weights are shared so that swapping ``x`` and ``y`` swaps the outputs: each
hidden unit ``i`` has a dual ``i'`` whose input weights are ``i``'s swapped
(``v_{x_k, i'} = v_{y_k, i}``, ``v_{y_k, i'} = v_{x_k, i}``), whose output weights are ``i``'s
swapped (``w_{i', >} = w_{i, <}``, ``w_{i', <} = w_{i, >}``), with shared biases
(``b_i = b_{i'}``, ``b_> = b_<``). With ``a = V_x x + V_y y + b`` and ``a' = V_y x + V_x y + b``:

    N_>([x, y]) = sigmoid(w_> . sigmoid(a) + w_< . sigmoid(a') + b_o),
    N_<([x, y]) = sigmoid(w_< . sigmoid(a) + w_> . sigmoid(a') + b_o),

so ``N_>([x, y]) = N_<([y, x])`` and ``N_>([x, x]) = N_<([x, x])`` hold for every weight (the
paper's reflexivity and equivalence of ``>`` and ``<``). The preference

    P(x > y) = (1 + N_>([x, y]) - N_<([x, y])) / 2

is then ``1 - P(y > x)`` by construction, and ``1/2`` on ``x = y``. Training minimises the
paper's squared error over preference pairs ``x > y`` (target ``[1, 0]``):

    E = (1 - N_>([x, y]))^2 + N_<([x, y])^2

(the swapped pair with target ``[0, 1]`` has the same error, so it is not added). Pure
functions of a ``CmpNNParams`` pytree; ``train`` is full-batch Adam (optax) as a ``lax.scan``
over steps, with a mask for padded pairs. Nothing here is jitted: callers jit (``sortnet``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

__all__ = ["CmpNNParams", "init", "outputs", "pair_loss", "preference", "train"]


class CmpNNParams(NamedTuple):
    """``v_x, v_y: (h, d)`` input weights of the ``h`` hidden units (their duals swap them),
    ``b: (h,)`` hidden biases (shared with the duals), ``w_gt, w_lt: (h,)`` the hidden units'
    weights to ``N_>`` and ``N_<`` (the duals swap them), ``b_out: ()`` the shared output
    bias."""

    v_x: jax.Array
    v_y: jax.Array
    b: jax.Array
    w_gt: jax.Array
    w_lt: jax.Array
    b_out: jax.Array


def init(key, n_features: int, n_hidden: int, dtype=None) -> CmpNNParams:
    """Random weights: inputs ``N(0, 1 / d)``, outputs ``N(0, 1 / h)``, biases 0 (``key``: a
    JAX PRNG key; ``n_hidden``: the ``h`` unit pairs, ``2h`` hidden units in all)."""
    dtype = jnp.result_type(float) if dtype is None else dtype
    kx, ky, kg, kl = jax.random.split(key, 4)
    d, h = n_features, n_hidden
    scale_in, scale_out = 1.0 / jnp.sqrt(d), 1.0 / jnp.sqrt(h)
    return CmpNNParams(
        scale_in * jax.random.normal(kx, (h, d), dtype),
        scale_in * jax.random.normal(ky, (h, d), dtype),
        jnp.zeros(h, dtype),
        scale_out * jax.random.normal(kg, (h,), dtype),
        scale_out * jax.random.normal(kl, (h,), dtype),
        jnp.zeros((), dtype),
    )


def outputs(params: CmpNNParams, x, y) -> tuple[jax.Array, jax.Array]:
    """``(N_>([x, y]), N_<([x, y]))`` for ``x, y: (d,)`` (module docstring)."""
    hidden = jax.nn.sigmoid(params.v_x @ x + params.v_y @ y + params.b)
    dual = jax.nn.sigmoid(params.v_y @ x + params.v_x @ y + params.b)
    gt = jax.nn.sigmoid(params.w_gt @ hidden + params.w_lt @ dual + params.b_out)
    lt = jax.nn.sigmoid(params.w_lt @ hidden + params.w_gt @ dual + params.b_out)
    return gt, lt


def preference(params: CmpNNParams, x, y) -> jax.Array:
    """``P(x > y) = (1 + N_> - N_<) / 2`` in ``[0, 1]``; ``1 - P(y > x)`` exactly."""
    gt, lt = outputs(params, x, y)
    return 0.5 * (1.0 + gt - lt)


def pair_loss(params: CmpNNParams, winners, losers, mask=None) -> jax.Array:
    """Mean squared error ``(1 - N_>)^2 + N_<^2`` over the pairs ``winners[p] > losers[p]``
    (``(P, d)`` each; ``mask: (P,)`` bool, False for padding; 0 where no pair is real)."""
    gt, lt = jax.vmap(outputs, in_axes=(None, 0, 0))(params, winners, losers)
    err = (1.0 - gt) ** 2 + lt**2
    mask = jnp.ones(err.shape, bool) if mask is None else mask
    count = jnp.sum(mask)
    return jnp.sum(jnp.where(mask, err, 0.0)) / jnp.where(count > 0, count, 1)


def train(params: CmpNNParams, winners, losers, mask, n_steps: int, learning_rate, vali=None):
    """``n_steps`` full-batch Adam steps on ``pair_loss`` from ``params``; returns ``(params,
    losses: (n_steps,))``, the loss before each step. With ``vali = (winners, losers, mask)``
    the returned network is the step's with the lowest ``pair_loss`` on ``vali`` (no real
    validation pair: the last). ``n_steps`` is static under ``jit``; ``learning_rate`` may be
    traced."""
    optimizer = optax.adam(learning_rate)
    grad = jax.value_and_grad(pair_loss)
    has_vali = False if vali is None else jnp.any(vali[2])

    def step(carry, _):
        p, state, best, best_loss = carry
        loss, g = grad(p, winners, losers, mask)
        updates, state = optimizer.update(g, state, p)
        p = optax.apply_updates(p, updates)
        v = -jnp.inf if vali is None else jnp.where(has_vali, pair_loss(p, *vali), -jnp.inf)
        better = v <= best_loss
        best = jax.tree_util.tree_map(lambda a, b: jnp.where(better, a, b), p, best)
        return (p, state, best, jnp.where(better, v, best_loss)), loss

    start = (params, optimizer.init(params), params, jnp.asarray(jnp.inf, params.b.dtype))
    (_, _, best, _), losses = jax.lax.scan(step, start, None, n_steps)
    return best, losses
