"""One shape for an experiment's protocol: its settings as a frozen dataclass, its presets as
``PRESETS = {"reduced": ..., "full": ...}`` of that dataclass, and ``--protocol`` choosing the
preset whose values every option not given keeps.

A study declares::

    @dataclasses.dataclass(frozen=True)
    class Settings(Protocol):
        collection: str = "sample"          # one field per option, named as its dest
        queries: int = 3

    PRESETS = {"reduced": Settings(), "full": Settings(collection="OHSUMED", queries=30)}

    def add_arguments(parser):
        add_protocol_argument(parser, PRESETS, help="...")
        parser.add_argument("--queries", type=int, default=None)   # None: the preset's

    def check(args):
        p = from_args(args, PRESETS)      # the preset, each option given in its place
        ...                               # the study's checks, ValueError naming the option

and reports ``p.settings()``. The run's settings are

    settings = PRESETS[args.protocol] with field := args.field for each field args gives
    (not None), then the fixed values (the seed),

so an option given explicitly always overrides its preset. Host-side only; nothing compiles.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping

__all__ = ["Protocol", "add_protocol_argument", "from_args", "given", "preset_of"]

#: The preset a run without ``--protocol`` gets.
DEFAULT = "reduced"


@dataclasses.dataclass(frozen=True)
class Protocol:
    """The base of a study's settings (a frozen dataclass; fields are the study's)."""

    def settings(self) -> dict:
        """The settings as the results report them: every field in declaration order, tuples
        as lists (JSON)."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def __getitem__(self, name: str):
        """``preset["k"]``: the spelling of the studies' former preset dicts, kept for them."""
        return getattr(self, name)


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def add_protocol_argument(
    parser: argparse.ArgumentParser,
    presets: Mapping[str, Protocol],
    *,
    help: str,
    default: str = DEFAULT,
) -> None:
    """``--protocol NAME``, one of ``presets`` (``default`` when not given)."""
    parser.add_argument("--protocol", choices=tuple(presets), default=default, help=help)


def preset_of(
    args, presets: Mapping[str, Protocol], default: str = DEFAULT
) -> tuple[str, Protocol]:
    """``(name, preset)`` of ``args.protocol`` (``default`` where absent or None);
    ``ValueError`` naming ``--protocol`` for a name that is not one of ``presets``."""
    name = getattr(args, "protocol", None) or default
    if name not in presets:
        raise ValueError(f"--protocol must be one of {', '.join(presets)}, got {name!r}")
    return name, presets[name]


def given(args, cls) -> dict:
    """``{field: value}`` of every field of the dataclass ``cls`` that ``args`` gives: an
    attribute of the same name, not None; lists become tuples."""
    out = {}
    for f in dataclasses.fields(cls):
        value = getattr(args, f.name, None)
        if value is not None:
            out[f.name] = tuple(value) if isinstance(value, list) else value
    return out


def from_args(
    args, presets: Mapping[str, Protocol], *, default: str = DEFAULT, **fixed
) -> Protocol:
    """The preset of ``args.protocol`` with every field that ``args`` gives (``given``) in its
    place, then ``fixed``. Unchecked: the study checks the values it gets (``ValueError``
    naming the option)."""
    _, base = preset_of(args, presets, default)
    return dataclasses.replace(base, **{**given(args, type(base)), **fixed})
