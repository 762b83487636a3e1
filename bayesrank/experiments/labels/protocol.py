"""The labels study's protocol: one configuration, two presets, any setting overridable, and
the checks that name the option."""

from __future__ import annotations

import dataclasses

from .._common import check_positive
from ..protocol import Protocol as _Base
from ..protocol import from_args as _preset_with_options

__all__ = ["COLLECTIONS", "PRESETS", "WAYS", "LabelsProtocol", "Protocol", "from_args"]

#: The collections with grades (the relational study's loaders).
COLLECTIONS = ("sample", "OHSUMED", "MQ2008", "MovieLens")
#: The three ways of spending the judgements.
WAYS = ("pairs", "ties", "grades")


@dataclasses.dataclass(frozen=True)
class LabelsProtocol(_Base):
    """One run's settings (the package docstring says what each means); ``settings()`` is the
    results' copy."""

    collection: str = "sample"
    queries: int = 3
    budget: tuple[int, ...] = (30,)
    repeats: int = 1
    seed: int = 0


#: The two presets (``experiments.protocol``); an option given overrides its value.
PRESETS = {
    "reduced": LabelsProtocol(),
    "full": LabelsProtocol(collection="OHSUMED", queries=30, budget=(25, 50, 100), repeats=2),
}


def from_args(args) -> LabelsProtocol:
    """The preset of ``args.protocol`` with every option given overriding it (checked)."""
    p = _preset_with_options(args, PRESETS, seed=int(getattr(args, "seed", 0) or 0))
    budget = tuple(check_positive(b, "--budget", low=2) for b in p.budget)
    for name in ("queries", "repeats"):
        check_positive(getattr(p, name), f"--{name}")
    if p.collection not in COLLECTIONS:
        raise ValueError(f"--collection must be one of {COLLECTIONS}")
    return dataclasses.replace(p, budget=budget)


#: The old name (the base is ``experiments.protocol.Protocol``).
Protocol = LabelsProtocol
