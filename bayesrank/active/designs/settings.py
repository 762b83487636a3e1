"""The designs loop's static settings, their bounds and their check, and the proposal modes.

Apart from the loop (``loop``) because the session, the command line and the benchmarks check
settings before anything of the loop is traced.
"""

from __future__ import annotations

from typing import NamedTuple

from ...data.checks import check_choice, check_int
from ...inference.nuts.sampler import MAX_DRAWS
from . import acquisition as acq

#: The posteriors the loop can run on: EP and Laplace (Gaussian), and NUTS (draws of the exact
#: posterior; its hyperparameters are learned by EP's evidence, and EP's sites warm-start that).
ENGINES = ("ep", "laplace", "nuts")

#: Upper bounds of ``Settings``' sizes (generous: BoTorch's defaults are 512-1024 candidates and
#: 256-1024 samples). A proposal scores ``n_raw`` candidates against ``n_base`` samples
#: (``n_mc``, or ``nuts_samples`` draws with ``engine="nuts"``) of ``q <= 4`` designs:
#: ``n_raw * n_base <= MAX_SCORED`` keeps that array within 512 MiB in float64.
MAX_CANDIDATES = 2**14  # n_raw (and so n_starts)
MAX_SAMPLES = 2**14  # n_mc, nuts_samples
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
]


class Settings(NamedTuple):
    """The loop's static settings: ``engine`` (``"ep"`` or ``"laplace"``); ``acquisition``
    (one of ``acquisition.ACQUISITIONS``); ``learn_every``: re-learn ``theta`` before every
    ``learn_every``-th proposal (0: never), with ``learn_steps`` Adam steps; the optimiser's
    ``n_raw``, ``n_starts``, ``steps``; ``n_mc`` base samples for ``"qeubo"``; NUTS's
    ``nuts_warmup`` and ``nuts_samples`` (one chain) for ``engine="nuts"``. Bounds:
    ``n_raw``, ``n_mc``, ``nuts_samples`` at most ``2^14``, ``n_raw`` times the samples
    (``n_mc``, or ``nuts_samples`` with NUTS) at most ``2^24``, ``steps`` and
    ``learn_steps`` at most ``10^6`` (``check_settings``)."""

    engine: str = "ep"
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
    """``settings`` if it is a ``Settings`` whose every field is valid, else ``ValueError``
    naming the field (``settings.n_starts must be an integer in [1, 64], got 100``). The
    sizes are bounded (``MAX_CANDIDATES``, ``MAX_SAMPLES``, ``MAX_SCORED``, ``MAX_STEPS``) so
    that a proposal's arrays fit in memory."""
    if not isinstance(settings, Settings):
        raise ValueError(f"settings must be a designs.Settings, got {type(settings).__name__}")
    check_choice(settings.engine, "settings.engine", tuple(ENGINES))
    check_choice(settings.acquisition, "settings.acquisition", acq.ACQUISITIONS)
    check_int(settings.learn_every, "settings.learn_every", 0)
    check_int(settings.learn_steps, "settings.learn_steps", 0, MAX_STEPS)
    check_int(settings.n_raw, "settings.n_raw", 1, MAX_CANDIDATES)
    check_int(settings.n_starts, "settings.n_starts", 1, settings.n_raw)
    check_int(settings.steps, "settings.steps", 0, MAX_STEPS)
    check_int(settings.n_mc, "settings.n_mc", 1, MAX_SAMPLES)
    check_int(settings.nuts_warmup, "settings.nuts_warmup", 0, MAX_DRAWS)
    check_int(settings.nuts_samples, "settings.nuts_samples", 1, MAX_SAMPLES)
    base = "nuts_samples" if settings.engine == "nuts" else "n_mc"
    n_base = getattr(settings, base)
    if settings.n_raw * n_base > MAX_SCORED:
        raise ValueError(
            f"settings.n_raw * settings.{base} = {settings.n_raw} * {n_base} exceeds "
            f"{MAX_SCORED} (the candidates scored against the samples in each proposal); "
            f"lower either"
        )
    return settings


#: Where a proposal's designs may lie: anywhere in the cube, on the pool's candidate pairs, or
#: the better of the two (``search``).
MODES = ("cube", "pool", "mixed")


def check_mode(mode: str, settings: Settings) -> None:
    """Refuse an unknown ``mode``, and a pool mode for an acquisition with look-ahead designs
    (``acquisition.DESIGNS``), which live anywhere in the cube."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mode != "cube" and settings.acquisition in acq.DESIGNS:
        raise ValueError(f"acquisition {settings.acquisition!r} needs look-ahead designs "
                         f"anywhere in the cube; mode {mode!r} offers pool pairs only")  # fmt: skip
