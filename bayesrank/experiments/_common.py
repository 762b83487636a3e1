"""What the experiment commands share: reading the data (the bundled sample, a LETOR file or a
folder), option checks that name the option, the prior every GP experiment starts from, progress
lines on stderr, warnings kept for the results, strict JSON, and writing the outputs.

Host-side only; nothing here compiles.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..data.files import first_non_finite

__all__ = [
    "Progress",
    "check_fraction",
    "check_positive",
    "fold_files",
    "held_out_value",
    "load_fold",
    "load_queries",
    "median_rho",
    "rbf_entity_prior",
    "recorded_warnings",
    "rng_for",
    "strict_json",
    "warning_lines",
    "write_outputs",
]

#: The parts of a LETOR fold folder, in the order they are read.
PARTS = ("train", "vali", "test")


def check_positive(value, option: str, *, low: int = 1) -> int:
    """An integer ``>= low`` given as ``option`` (``ValueError`` naming it otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"{option} must be an integer >= {low}, got {value!r}")
    return int(value)


def check_fraction(value, option: str) -> float:
    """A number strictly between 0 and 1 given as ``option``."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{option} must be a number in (0, 1), got {value!r}") from None
    if not 0.0 < x < 1.0:
        raise ValueError(f"{option} must be a number in (0, 1), got {value!r}")
    return x


def _read(path: Path, n_features: int | None = None) -> list:
    """One LETOR file; any failure to read it is a ``ValueError`` that names the file."""
    from ..data.letor import load_letor

    try:
        return load_letor(path, n_features=n_features)
    except (ValueError, OSError) as err:
        message = str(err)
        if str(path) not in message:
            message = f"{path}: {message}"
        raise ValueError(f"--data-dir: cannot read {message}") from None


def _same_width(groups: Sequence[list]) -> list[list]:
    """Queries of several files with one feature width: absent features are 0 in LETOR's sparse
    format, so narrower files gain zero columns."""
    d = max((q.n_features for g in groups for q in g), default=0)
    return [
        [
            q
            if q.n_features == d
            else dataclasses.replace(q, X=np.pad(q.X, ((0, 0), (0, d - q.n_features))))
            for q in g
        ]
        for g in groups
    ]


def _existing(data_dir) -> Path:
    path = Path(data_dir)
    if not path.exists():
        raise ValueError(f"--data-dir {str(path)!r} does not exist (a LETOR file or a folder)")
    return path


def _letor_files(folder: Path) -> list[Path]:
    """A fold folder's ``train``/``vali``/``test`` files (``.txt`` or ``.txt.gz``), else every
    ``*.txt`` and ``*.txt.gz`` file of the folder, by name."""
    parts = [p for p in fold_files(folder, required=()).values()]
    if parts:
        return parts
    files = sorted(p for p in folder.iterdir() if p.name.endswith((".txt", ".txt.gz")))
    if not files:
        raise ValueError(
            f"--data-dir {str(folder)!r} holds no LETOR file (*.txt or *.txt.gz, or a fold's "
            "train/vali/test)"
        )
    return files


def load_queries(data_dir) -> tuple[list, str]:
    """The queries an experiment runs on, and where they came from (for the results).

    ``data_dir`` None: the bundled OHSUMED sample (``bayesrank.data.sample.load_sample``);
    a file: its queries; a folder: its fold files (train, vali, test) or else every LETOR file
    in it, the queries of all of them in that order, features padded to one width.

    Raises:
        ValueError: naming ``--data-dir`` for a path that does not exist or a folder without a
            LETOR file, and the file (and line) for a file that is not in LETOR format.
    """
    if data_dir is None:
        from ..data.sample import load_sample, sample_path

        return load_sample(), f"bundled sample ({sample_path().name})"
    path = _existing(data_dir)
    files = _letor_files(path) if path.is_dir() else [path]
    groups = _same_width([_read(f) for f in files])
    return [q for g in groups for q in g], ", ".join(str(f) for f in files)


def fold_files(folder: Path, required: Sequence[str] = ("train", "test")) -> dict[str, Path]:
    """``{part: path}`` of a LETOR fold folder's ``train``, ``vali`` and ``test`` files
    (``<part>.txt.gz`` or ``<part>.txt``); ``ValueError`` naming ``--data-dir`` where one of
    ``required`` is missing."""
    found = {}
    for part in PARTS:
        for name in (f"{part}.txt.gz", f"{part}.txt"):
            if (folder / name).is_file():
                found[part] = folder / name
                break
    missing = [p for p in required if p not in found]
    if missing:
        raise ValueError(
            f"--data-dir {str(folder)!r} is not a LETOR fold folder: no {', '.join(missing)} file "
            "(train.txt.gz / test.txt.gz, or .txt; vali is optional)"
        )
    return found


def load_fold(folder: Path) -> dict[str, list]:
    """The queries of a fold folder's parts, ``{part: [Query]}``, at one feature width."""
    files = fold_files(folder)
    groups = _same_width([_read(p) for p in files.values()])
    return dict(zip(files, groups, strict=True))


def median_rho(X) -> float:
    """The median heuristic: ``1 / median`` of the distances between distinct documents of
    ``X: (n, d)`` (1.0 when all documents coincide)."""
    from ..learning.initialize import median_distance

    return 1.0 / median_distance(X)


def rbf_entity_prior(X, entity: float = 0.1):
    """The fixed GP prior of ``bayesrank active``: an RBF kernel (``kappa = 1``, ``rho`` by the
    median heuristic on ``X``) plus an independent per-document effect of scale ``entity``."""
    from ..kernels import RBF, XPGP, Independent

    return XPGP(RBF(1.0, median_rho(X)), (), entity=Independent(entity))


class Progress:
    """``[i/N] what (t s)`` lines on stderr, ``t`` the seconds since the experiment started."""

    def __init__(self, total: int, stream=None):
        self.total, self.done, self.start = total, 0, time.perf_counter()
        self.stream = stream

    def __call__(self, what: str) -> None:
        self.done += 1
        stream = self.stream or sys.stderr
        print(f"[{self.done}/{self.total}] {what} ({self.seconds:.0f} s)", file=stream, flush=True)

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.start


class recorded_warnings:
    """Keep every warning raised inside (none printed) in ``self.messages``, one line each:
    a run prints its table and progress only, and its results say what was warned."""

    def __init__(self):
        self.messages: list[str] = []

    def __enter__(self):
        self._catch = warnings.catch_warnings(record=True)
        self._caught = self._catch.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)
        for w in self._caught:
            line = f"{w.category.__name__}: {str(w.message).splitlines()[0][:300]}"
            if line not in self.messages:
                self.messages.append(line)


def strict_json(obj) -> str:
    """``obj`` as strict JSON (RFC 8259); ``ValueError`` naming the first number that is not
    finite instead of writing ``NaN`` or ``Infinity``."""
    if (where := first_non_finite(obj)) is not None:
        raise ValueError(f"cannot write results.json: {where} is not a finite number")
    return json.dumps(obj, indent=1, allow_nan=False)


def write_outputs(
    results: dict, out, table: str, figure: Callable[[], object] | None, name: str
) -> list[Path]:
    """``results.json``, ``table.txt`` and, with matplotlib, ``<name>.png`` (``figure()``
    returns the Figure or Axes to save) in the folder ``out`` (created). Returns the paths
    written, which are also listed in ``results["files"]``."""
    strict_json(results)  # checked before anything is written
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {str(out)!r} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "results.json", out / "table.txt"]
    if figure is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            figure = None
    if figure is not None:
        from ..plot import save

        written.append(save(figure(), out / f"{name}.png", close=True))
    results["files"] = [p.name for p in written]
    written[0].write_text(strict_json(results))
    written[1].write_text(table.rstrip("\n") + "\n")
    return written


def warning_lines(messages: Sequence[str], width: int = 160) -> list[str]:
    """The table's lines for the warnings a run kept (none: no line)."""
    return [f"warning: {m[:width]}" for m in messages]


def rng_for(seed: int, *parts: int) -> np.random.Generator:
    """A NumPy generator of ``seed`` and the indices ``parts`` (a query's, a repetition's)."""
    return np.random.default_rng([int(seed), *map(int, parts)])


def held_out_value(text: str) -> int | float:
    """``--held-out`` from the command line: a count (``"5"``) or a share (``"0.2"``)."""
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"--held-out {text!r}: a share in (0, 1) or a count") from None
