"""Every command's ``--help`` keeps its word: each subcommand has a description, each option a
help text naming every choice it accepts (and ``--function`` every function), the top-level
and ``experiment`` help name every experiment, no ``%%`` is printed, and the command-line guide
(``docs/guide/cli.md``) covers every subcommand and experiment. The reference is the parser
itself (argparse's own tree), walked to every leaf."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from bayesrank.cli import _parser
from bayesrank.data.functions import NAMES as FUNCTIONS
from bayesrank.experiments import EXPERIMENTS

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "cli.md"
EVERY_EXPERIMENT = ["relational", *EXPERIMENTS]


def parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """``(path, parser)`` of ``parser`` and every subcommand below it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, (*path, name))


ALL = list(parsers(_parser()))


def words(text: str) -> str:
    return " ".join(text.split()).lower()


def test_the_walk_reaches_every_command_and_experiment():
    paths = {p for p, _ in ALL}
    for name in ("fit", "predict", "evaluate", "active", "optimize", "data"):
        assert (name,) in paths
    assert {("experiment", e) for e in EVERY_EXPERIMENT} <= paths


@pytest.mark.parametrize(("path", "parser"), ALL, ids=[" ".join(p) or "bayesrank" for p, _ in ALL])
def test_every_help_describes_and_names_its_choices(path, parser):
    text = parser.format_help()
    assert "%%" not in text
    assert parser.description, f"bayesrank {' '.join(path)} has no description"
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._VersionAction):
            continue
        name = "/".join(action.option_strings) or action.dest
        if isinstance(action, argparse._SubParsersAction):
            for choice in action.choices:  # each subcommand listed
                assert choice in text
            continue
        assert action.help, f"bayesrank {' '.join(path)} {name} has no help"
        for choice in action.choices or ():
            assert re.search(rf"\b{re.escape(str(choice).lower())}\b", words(action.help)), (
                f"bayesrank {' '.join(path)} {name}: its help does not name {choice!r}"
            )


def test_the_command_and_experiment_helps_name_every_experiment():
    top = words(_parser().format_help())
    experiment = words(dict(ALL)[("experiment",)].format_help())
    for name in EVERY_EXPERIMENT:
        assert name in top and name in experiment


def test_function_names_every_synthetic_function():
    optimize = dict(ALL)[("optimize",)]
    (action,) = [a for a in optimize._actions if "--function" in a.option_strings]
    assert all(f in action.help for f in FUNCTIONS)


def test_data_dir_says_what_its_default_is_only_where_there_is_one():
    for name, module in EXPERIMENTS.items():
        parser = dict(ALL)[("experiment", name)]
        actions = {a.dest: a for a in parser._actions}
        default_claimed = "data_dir" in actions and "bundled sample" in actions["data_dir"].help
        assert default_claimed == (getattr(module, "DATA_DIR", "") is not None and name != "large")
        assert ("figure" in actions["out"].help) == getattr(module, "FIGURE", True)


def test_the_cli_guide_covers_every_command_and_experiment():
    guide = GUIDE.read_text()
    for name in EVERY_EXPERIMENT:
        assert f"bayesrank experiment {name}" in guide, f"docs/guide/cli.md lacks {name}"
    for path, _ in ALL:
        if len(path) == 1:
            assert f"bayesrank {path[0]}" in guide, f"docs/guide/cli.md lacks {path[0]}"
