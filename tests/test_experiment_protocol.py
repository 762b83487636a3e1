"""``bayesrank.experiments.protocol``: the one shape of the experiments' ``--protocol`` presets:
a preset, every option given in its place (the seed fixed), ``--protocol`` checked, settings as
the results report them; and every experiment declares its presets in that shape."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from bayesrank.experiments import EXPERIMENTS, protocol
from bayesrank.experiments.relational import StudyConfig


@dataclasses.dataclass(frozen=True)
class Toy(protocol.Protocol):
    collection: str = "sample"
    queries: int = 3
    budget: tuple[int, ...] = (30,)
    seed: int = 0


PRESETS = {"reduced": Toy(), "full": Toy(collection="OHSUMED", queries=30, budget=(25, 50))}


def parse(*argv):
    parser = argparse.ArgumentParser()
    protocol.add_protocol_argument(parser, PRESETS, help="the preset")
    parser.add_argument("--collection", default=None)
    parser.add_argument("--queries", type=int, default=None)
    parser.add_argument("--budget", type=int, nargs="+", default=None)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(list(argv))


def test_an_option_given_overrides_its_preset():
    assert protocol.from_args(parse(), PRESETS) == Toy()
    full = protocol.from_args(parse("--protocol", "full", "--queries", "7"), PRESETS, seed=5)
    assert full == Toy(collection="OHSUMED", queries=7, budget=(25, 50), seed=5)
    # lists become tuples (the dataclass is frozen and hashable); the report's copy has lists
    given = protocol.from_args(parse("--budget", "4", "8"), PRESETS)
    assert given.budget == (4, 8) and hash(given)
    assert given.settings() == {"collection": "sample", "queries": 3, "budget": [4, 8], "seed": 0}
    assert given["queries"] == 3  # the former preset dicts' spelling


def test_protocol_is_checked_and_defaults_to_reduced():
    assert protocol.preset_of(argparse.Namespace(), PRESETS) == ("reduced", Toy())
    with pytest.raises(ValueError, match="--protocol must be one of reduced, full, got 'x'"):
        protocol.from_args(argparse.Namespace(protocol="x"), PRESETS)
    with pytest.raises(SystemExit):  # argparse refuses it first on the command line
        parse("--protocol", "x")


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_every_experiment_declares_its_presets_in_the_one_shape(name):
    module = EXPERIMENTS[name]
    owner = {
        "active": "bayesrank.experiments.active.protocol",
        "baselines": "bayesrank.experiments.baselines.protocol",
        "inference": "bayesrank.experiments.inference.protocol",
        "labels": "bayesrank.experiments.labels.protocol",
    }.get(name)
    if owner is not None:
        import importlib

        module = importlib.import_module(owner)
    presets = module.PRESETS
    assert list(presets) == ["reduced", "full"]
    assert all(isinstance(p, protocol.Protocol) for p in presets.values())
    assert len({type(p) for p in presets.values()}) == 1
    parser = argparse.ArgumentParser()
    EXPERIMENTS[name].add_arguments(parser)
    assert parser.parse_args([]).protocol == "reduced"


def test_the_relational_config_is_one_too():
    assert isinstance(StudyConfig(), protocol.Protocol)
    args = argparse.Namespace(collection="MQ2008", queries=0, known=[20], models=None, seed=1)
    config = StudyConfig.from_args(args)
    assert (config.collection, config.queries, config.known, config.seed) == (
        "MQ2008",
        10,
        (20,),
        1,
    )
