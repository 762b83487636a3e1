"""The labels study's protocol: one configuration, two presets, any setting overridable, and
the checks that name the option."""

from __future__ import annotations

import dataclasses

from .._common import check_positive

__all__ = ["COLLECTIONS", "PRESETS", "WAYS", "Protocol", "from_args"]

#: The collections with grades (the relational study's loaders).
COLLECTIONS = ("sample", "OHSUMED", "MQ2008", "MovieLens")
#: The three ways of spending the judgements.
WAYS = ("pairs", "ties", "grades")


@dataclasses.dataclass(frozen=True)
class Protocol:
    """One run's settings (the package docstring says what each means)."""

    collection: str = "sample"
    queries: int = 3
    budget: tuple[int, ...] = (30,)
    repeats: int = 1
    seed: int = 0

    def settings(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in vars(self).items()}


PRESETS = {
    "reduced": Protocol(),
    "full": Protocol(collection="OHSUMED", queries=30, budget=(25, 50, 100), repeats=2),
}


def from_args(args) -> Protocol:
    """The preset of ``args.protocol`` with every option given overriding it (checked)."""
    preset = PRESETS[args.protocol]
    given = {
        name: getattr(args, name)
        for name in ("collection", "queries", "budget", "repeats")
        if getattr(args, name, None) is not None
    }
    if "budget" in given:
        given["budget"] = tuple(check_positive(b, "--budget", low=2) for b in given["budget"])
    for name in ("queries", "repeats"):
        if name in given:
            check_positive(given[name], f"--{name}")
    if given.get("collection", preset.collection) not in COLLECTIONS:
        raise ValueError(f"--collection must be one of {COLLECTIONS}")
    return dataclasses.replace(preset, seed=int(getattr(args, "seed", 0) or 0), **given)
