"""The designs loop's static settings, their bounds and their check, and the proposal modes.

Apart from the loop (``loop``) because the session, the command line and the benchmarks check
settings before anything of the loop is traced.
"""

from __future__ import annotations

from typing import NamedTuple

from ...data.checks import check_choice, check_int
from ...inference.engine import Engine, GaussianEngine
from ...inference.engines import EP, NUTS, names, resolve
from ...inference.nuts.sampler import MAX_DRAWS
from . import acquisition as acq

#: The engines' names the loop takes (``inference.engines.resolve`` makes them objects): any
#: ``GaussianEngine`` runs it (EP, Laplace or a user's), and ``NUTS`` (draws of the exact
#: posterior; its hyperparameters are learned by its ``learning_engine()``'s evidence, EP's,
#: whose sites also warm-start that).
ENGINES = names()

#: Upper bounds of ``Settings``' sizes (generous: BoTorch's defaults are 512-1024 candidates and
#: 256-1024 samples). A proposal scores ``n_raw`` candidates against ``n_base`` samples
#: (``n_mc``, or a ``NUTS`` engine's draws, ``n_draws``) of ``q <= 4`` designs:
#: ``n_raw * n_base <= MAX_SCORED`` keeps that array within 512 MiB in float64.
MAX_CANDIDATES = 2**14  # n_raw (and so n_starts)
MAX_SAMPLES = 2**14  # n_mc, nuts_samples, n_draws(engine)
MAX_SCORED = 2**24  # n_raw * n_base
MAX_STEPS = 10**6  # steps, learn_steps: Adam steps a proposal (each a pass over the candidates)

__all__ = [
    "ENGINES",
    "MAX_CANDIDATES",
    "MAX_SAMPLES",
    "MAX_SCORED",
    "MAX_STEPS",
    "MODES",
    "Settings",
    "check_mode",
    "check_settings",
    "gaussian_engine",
    "n_draws",
]


class Settings(NamedTuple):
    """The loop's static settings: ``engine``, an engine object (``EP()``, the default;
    ``Laplace()``; any ``GaussianEngine``; or ``NUTS(...)``) or its name (``ENGINES``,
    resolved by ``check_settings``); ``acquisition``
    (one of ``acquisition.ACQUISITIONS``); ``learn_every``: re-learn ``theta`` before every
    ``learn_every``-th proposal (0: never), with ``learn_steps`` Adam steps; the optimiser's
    ``n_raw``, ``n_starts``, ``steps``; ``n_mc`` base samples for ``"qeubo"``;
    ``nuts_warmup`` and ``nuts_samples`` (one chain): what the name ``engine="nuts"`` stands
    for, ``NUTS(num_warmup=nuts_warmup, num_samples=nuts_samples, num_chains=1)`` (a ``NUTS``
    object carries its own, and these must keep their defaults beside it). Bounds: ``n_raw``,
    ``n_mc``, the draws at most ``2^14``, ``n_raw`` times the samples (``n_mc``, or the draws
    with NUTS) at most ``2^24``, ``steps`` and ``learn_steps`` at most ``10^6``
    (``check_settings``)."""

    engine: Engine | str = EP()
    acquisition: str = "eubo"
    learn_every: int = 1
    learn_steps: int = 10
    n_raw: int = 256
    n_starts: int = 8
    steps: int = 50
    n_mc: int = 256
    nuts_warmup: int = 200
    nuts_samples: int = 200


def check_settings(settings) -> Settings:
    """``settings`` with its engine an object (a name resolved by ``inference.engines.resolve``)
    if it is a ``Settings`` whose every field is valid, else ``ValueError`` naming the field
    (``settings.n_starts must be an integer in [1, 64], got 100``). The engine must be a
    ``GaussianEngine`` or ``NUTS``. The sizes are bounded (``MAX_CANDIDATES``, ``MAX_SAMPLES``,
    ``MAX_SCORED``, ``MAX_STEPS``) so that a proposal's arrays fit in memory."""
    if not isinstance(settings, Settings):
        raise ValueError(f"settings must be a designs.Settings, got {type(settings).__name__}")
    named = isinstance(settings.engine, str)
    if named:
        check_choice(settings.engine, "settings.engine", ENGINES)
    engine = resolve(settings.engine, "settings.engine")
    check_choice(settings.acquisition, "settings.acquisition", acq.ACQUISITIONS)
    check_int(settings.learn_every, "settings.learn_every", 0)
    check_int(settings.learn_steps, "settings.learn_steps", 0, MAX_STEPS)
    check_int(settings.n_raw, "settings.n_raw", 1, MAX_CANDIDATES)
    check_int(settings.n_starts, "settings.n_starts", 1, settings.n_raw)
    check_int(settings.steps, "settings.steps", 0, MAX_STEPS)
    check_int(settings.n_mc, "settings.n_mc", 1, MAX_SAMPLES)
    check_int(settings.nuts_warmup, "settings.nuts_warmup", 0, MAX_DRAWS)
    check_int(settings.nuts_samples, "settings.nuts_samples", 1, MAX_SAMPLES)
    if isinstance(engine, NUTS):
        if named:
            engine = NUTS(num_warmup=settings.nuts_warmup, num_samples=settings.nuts_samples,
                          num_chains=1)  # fmt: skip
        else:
            _check_nuts(engine, settings)
        base = "nuts_samples" if named else "engine's draws"
    elif isinstance(engine, GaussianEngine):
        base = "n_mc"
    else:
        raise ValueError(
            f"settings.engine={engine!r} cannot run the designs loop: it needs a "
            "GaussianEngine (EP(...), Laplace(...) or your own) or NUTS(...), whose fits run "
            "inside the loop's compiled program"
        )
    n_base = n_draws(engine) if base != "n_mc" else settings.n_mc
    if settings.n_raw * n_base > MAX_SCORED:
        raise ValueError(
            f"settings.n_raw * settings.{base} = {settings.n_raw} * {n_base} exceeds "
            f"{MAX_SCORED} (the candidates scored against the samples in each proposal); "
            f"lower either"
        )
    return settings._replace(engine=engine)


def _check_nuts(engine: NUTS, settings: Settings) -> None:
    """A ``NUTS`` object's counts within the loop's bounds, and no second spelling beside it."""
    defaults = Settings()
    for field in ("nuts_warmup", "nuts_samples"):
        if getattr(settings, field) != getattr(defaults, field):
            raise ValueError(
                f"settings.{field} applies to engine='nuts' by name; with {engine!r} set its "
                f"num_{field[5:]} instead"
            )
    check_int(engine.num_warmup, "settings.engine.num_warmup", 0, MAX_DRAWS)
    check_int(engine.num_samples, "settings.engine.num_samples", 1, MAX_SAMPLES)
    check_int(engine.num_chains, "settings.engine.num_chains", 1, MAX_SAMPLES)
    if n_draws(engine) > MAX_SAMPLES:
        raise ValueError(
            f"settings.engine's draws, num_samples * num_chains = {n_draws(engine)}, exceed "
            f"{MAX_SAMPLES}"
        )


def n_draws(engine: NUTS) -> int:
    """The draws a ``NUTS`` engine gives: its chains' kept samples together."""
    return engine.num_samples * engine.num_chains


def gaussian_engine(engine: Engine) -> GaussianEngine:
    """The Gaussian engine whose fit the loop runs: the engine itself, or for ``NUTS`` its
    ``learning_engine()`` (EP), whose evidence learns ``theta`` and whose sites warm-start
    the next fit."""
    return engine if isinstance(engine, GaussianEngine) else engine.learning_engine()


#: Where a proposal's designs may lie: anywhere in the cube, on the pool's candidate pairs, or
#: the better of the two (``search``).
MODES = ("cube", "pool", "mixed")


def check_mode(mode: str, settings: Settings) -> None:
    """Refuse an unknown ``mode``, and a pool mode for an acquisition with look-ahead designs
    (``acquisition.DESIGNS``), which live anywhere in the cube."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mode != "cube" and settings.acquisition in acq.DESIGNS:
        raise ValueError(f"acquisition {settings.acquisition!r} scores a pair with look-ahead "
                         f"designs anywhere in the cube, so it cannot score a pool's candidate "
                         f"pairs (mode {mode!r}); without a pool (mode 'cube') it can, or choose "
                         f"another acquisition")  # fmt: skip
