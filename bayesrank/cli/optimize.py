"""``bayesrank optimize``: preferential Bayesian optimisation over the unit cube, one pair of
designs at a time; a person answers (``--interactive``), or a synthetic function does."""

from __future__ import annotations

import argparse
import json
import math
import shlex
import subprocess
import sys

from ..data.functions import NAMES as FUNCTIONS
from ..inference.engines import EP, names
from ._common import interact, seed, setup_jax

__all__ = ["add_parser"]

#: The answer file of ``--interactive`` when ``--answers`` is not given.
DEFAULT_ANSWERS = "optimize_answers.jsonl"

#: ``active.designs.acquisition.ACQUISITIONS``, written out: importing that package builds JAX
#: arrays, which must wait for ``setup_jax`` (float64), and every command builds this parser
#: (a test keeps the two lists equal).
ACQUISITION_CHOICES = ("eubo", "qeubo", "variance", "bald", "kg")


def _session_options(args: argparse.Namespace) -> dict:
    import jax

    from ..active.designs.settings import Settings

    settings = Settings(engine=args.engine, acquisition=args.acquisition)
    return {
        "settings": settings,
        "key": jax.random.PRNGKey(args.seed),
        "learn_every": args.learn_every,
        "pool": None if args.pool is None else _read_pool(args.pool, args.dim),
        "pool_mode": args.pool_mode,
        "time_budget_s": args.time_budget,
    }


def _read_pool(path: str, dim: int):
    """The designs of a CSV file, one a line (``dim`` numbers in ``[0, 1]``, each design
    once); ``ValueError`` naming the file and the line at fault."""
    import numpy as np

    try:
        text = open(path, encoding="utf-8").read().splitlines()
    except OSError as err:
        raise ValueError(f"--pool {path!r}: cannot read it ({err.strerror})") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"--pool {path!r}: not a UTF-8 text file ({err.reason} at byte "
                         f"{err.start})") from None  # fmt: skip
    rows, lines = [], {}  # lines: design -> the line it was first on
    for lineno, line in enumerate(text, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            row = [float(v) for v in line.split(",")]
        except ValueError:
            raise ValueError(f"{path}, line {lineno}: not {dim} numbers: {line[:80]!r}") from None
        if len(row) != dim or not all(0.0 <= v <= 1.0 for v in row):
            raise ValueError(
                f"{path}, line {lineno}: expected {dim} numbers in [0, 1], got {line[:80]!r}"
            )
        if (first := lines.setdefault(tuple(row), lineno)) != lineno:
            raise ValueError(f"{path}, line {lineno}: the design {line.strip()[:80]!r} repeats "
                             f"line {first} (a pool's designs must be distinct)")  # fmt: skip
        rows.append(row)
    if len(rows) < 2:
        raise ValueError(f"--pool {path!r}: at least 2 designs are needed, got {len(rows)}")
    return np.asarray(rows)


def _cmd_optimize(args: argparse.Namespace) -> int:
    """A person answers (``--interactive``), or ``--function`` does through a probit."""
    if args.interactive == (args.function is not None):
        raise ValueError("give one of --interactive or --function NAME")
    if args.describe is not None and not args.interactive:
        raise ValueError("--describe shows designs to a person: use it with --interactive")
    if args.dim < 1:
        raise ValueError(f"--dim must be a positive integer, got {args.dim}")
    if args.k < 0:
        raise ValueError(f"--k must be a non-negative integer, got {args.k}")
    if args.learn_every is not None and args.learn_every < 0:
        raise ValueError(f"--learn-every must be a non-negative integer, got {args.learn_every}")
    if args.time_budget is not None and not (math.isfinite(args.time_budget)
                                             and args.time_budget >= 0):  # fmt: skip
        raise ValueError(f"--time-budget must be a finite number >= 0, got {args.time_budget}")
    if not (math.isfinite(args.noise) and args.noise > 0):
        raise ValueError(f"--noise must be a finite number > 0, got {args.noise}")
    if args.pool is None and args.pool_mode == "pool":
        raise ValueError("--pool-mode pool proposes designs of a pool: give --pool FILE")
    setup_jax()
    from ..active.designs.session import DesignSession

    options = _session_options(args)
    if args.interactive:
        path = args.answers or DEFAULT_ANSWERS
        session = DesignSession(args.dim, answers=path, **options)
        return _interact(session, args.k, args.describe)
    return _by_function(args, options)


def _describe(command: str, a, b) -> str:
    """``command`` run with the designs ``a`` and ``b`` appended as JSON arrays: its stdout."""
    try:
        words = shlex.split(command)
    except ValueError as err:
        raise ValueError(f"--describe {command!r}: cannot split it into words ({err})") from None
    if not words:
        raise ValueError("--describe is empty: give a command")
    argv = [*words, json.dumps(a.tolist()), json.dumps(b.tolist())]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError as err:
        raise ValueError(f"--describe {command!r}: cannot run it ({err.strerror})") from None
    if done.returncode != 0:
        print(done.stderr, end="", file=sys.stderr)
        raise ValueError(f"--describe {command!r} exited with status {done.returncode}")
    return done.stdout


def _coordinates(x) -> str:
    return "(" + ", ".join(f"{v:.4f}" for v in x) + ")"


def _show_best(session) -> None:
    best = session.best()
    if best is None:
        print("no answers yet: no best guess")
        return
    x, mean = best
    print(f"best guess: {_coordinates(x)} (posterior mean {mean:.4f})")


def _interact(session, k: int, describe: str | None) -> int:
    def show(question) -> str:
        a, b = question.first, question.second
        if describe is None:
            return f"  [1] {_coordinates(a)}\n  [2] {_coordinates(b)}\n"
        return _describe(describe, a, b)

    print(f"{session.dim}-dimensional designs in [0, 1]; answers kept in {session.path}")
    interact(session, k, "which design do you prefer?", show)
    _show_best(session)
    return 0


def _by_function(args: argparse.Namespace, options: dict) -> int:
    import numpy as np

    from ..active.designs.session import optimize
    from ..data.functions import get

    function = get(args.function, args.dim)
    rng = np.random.default_rng(args.seed)

    def utility(x) -> float:
        return float(function(np.asarray(x)))

    def oracle(a, b) -> bool:  # a probit on the utility difference
        z = (utility(a) - utility(b)) / args.noise
        return bool(rng.random() < 0.5 * math.erfc(-z / math.sqrt(2.0)))

    session = optimize(oracle, args.dim, args.k, answers=args.answers, **options)
    print(
        f"{args.function} in {args.dim} dimensions: {len(session.pairs)} answers through a "
        f"probit with noise {args.noise}"
    )
    _show_best(session)
    best = session.best()
    if best is not None:
        print(f"its true utility: {utility(best[0]):.6g}")
    optimizer = ", ".join(f"{v:.4f}" for v in function.optimizer)
    print(f"the optimum: {function.optimum_value:.6g} at ({optimizer})")
    return 0


def add_parser(sub) -> None:
    opt = sub.add_parser(
        "optimize",
        help="preferential Bayesian optimisation over [0, 1]^dim (you or a function)",
        description="Preferential Bayesian optimisation over designs in [0, 1]^dim: the model "
        "proposes two designs at a time, you (--interactive) or a synthetic --function say "
        "which is better, and after every answer it re-fits a GP of the utility and proposes "
        "the pair its acquisition rates highest; at the end it prints its best guess. "
        "Answers are kept in --answers and a later run resumes from them.",
    )
    opt.add_argument("--dim", type=int, required=True, help="the designs' dimension")
    opt.add_argument("--interactive", action="store_true", help="you answer, in the terminal")
    opt.add_argument(
        "--describe",
        metavar="CMD",
        help="with --interactive: run CMD with the two designs appended as JSON arrays and "
        "show its output (default: the coordinates)",
    )
    opt.add_argument(
        "--function",
        metavar="NAME",
        help="a synthetic utility answers (bayesrank.data.functions): one of "
        + ", ".join(FUNCTIONS),
    )
    opt.add_argument(
        "--noise", type=float, default=0.1, help="the probit noise of --function (default 0.1)"
    )
    opt.add_argument("--k", type=int, default=20, help="how many answers (default 20)")
    opt.add_argument(
        "--answers",
        help=f"answer file, resumed if it exists (--interactive: default {DEFAULT_ANSWERS})",
    )
    opt.add_argument(
        "--acquisition",
        default="eubo",
        choices=ACQUISITION_CHOICES,
        help="how a pair is rated: eubo (the expected utility of the better design; the "
        "default), qeubo (the same by Monte Carlo), variance (the paper's rule, var(d) / "
        "(mean(d)^2 + var(d)) of the utility difference d), bald (what the answer tells about "
        "the utility), kg (the knowledge gradient: the best posterior mean after the answer; "
        "not with a pool)",
    )
    opt.add_argument("--engine", default=EP.name, choices=names(),
                     help="the posterior: EP (default), Laplace, or NUTS's draws")  # fmt: skip
    opt.add_argument(
        "--pool", default=None, help="CSV of designs you have (one a line, --dim numbers in [0, 1])"
    )
    opt.add_argument(
        "--pool-mode",
        default="mixed",
        choices=["mixed", "pool"],
        help="mixed: the pool's best pair or the cube's; pool: the pool's only",
    )
    opt.add_argument("--time-budget", type=float, default=None,
                     help="seconds a proposal's search may take (default: no limit)")  # fmt: skip
    opt.add_argument("--seed", type=seed, default=0, help="the proposals' and answers' seed")
    opt.add_argument(
        "--learn-every",
        type=int,
        default=None,
        help="re-learn the kernel's hyperparameters before every N-th proposal (0: never; "
        "default 1)",
    )
    opt.set_defaults(func=_cmd_optimize)
