"""What every subcommand shares: strict JSON and exact CSV output, float64 and the compilation
cache, and the question loop of the interactive sessions (``bayesrank active`` and ``bayesrank
optimize``)."""

from __future__ import annotations

import argparse
import json
import sys
import warnings

from ..data.checks import MAX_SEED  # the largest --seed
from ..data.files import first_non_finite

__all__ = [
    "MAX_K_LIMIT",
    "MAX_SEED",
    "REPLIES",
    "csv_rows",
    "csv_text",
    "data_path",
    "exact",
    "interact",
    "json_text",
    "plural",
    "read_reply",
    "seed",
    "setup_jax",
]

#: The largest ``--max-k`` ever accepted (beyond the longest query it only allocates memory).
MAX_K_LIMIT = 10**6


def seed(text: str) -> int:
    """``--seed``'s type: an integer in ``[0, MAX_SEED]`` (argparse's one-line error, exit 2,
    for anything else; a larger one overflowed JAX's int64 with a traceback)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, {MAX_SEED}], got {value}")
    return value


def exact(x) -> str:
    """A number as the shortest text that reads back to the same float64 (``repr`` of a Python
    float: ``0.1``, ``-1.4389...e-05``), whatever its NumPy type (NumPy 2's ``repr`` of a
    ``np.float64`` is ``np.float64(0.1)``, which no reader takes)."""
    return repr(float(x))


def _field(value) -> str:
    """One CSV field: floats by ``exact``; quoted (RFC 4180) where it holds a comma, a quote or
    a line break (a qid or document id), so that it stays one field."""
    text = exact(value) if isinstance(value, float) else str(value)
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def csv_text(head: list[str], rows: list[list]) -> str:
    """A CSV file: the header, then one line per row (fields by ``_field``), ``\\n`` ended."""
    return csv_rows([head, *rows])


def csv_rows(rows: list[list]) -> str:
    """CSV lines, one per row (fields by ``_field``), ``\\n`` ended."""
    return "".join(",".join(_field(v) for v in row) + "\n" for row in rows)


def json_text(obj) -> str:
    """``obj`` as strict JSON; ``ValueError`` naming the first non-finite number instead of
    writing ``NaN`` or ``Infinity`` (which JSON does not have)."""
    if (where := first_non_finite(obj)) is not None:
        raise ValueError(f"cannot write JSON: {where} is not a finite number")
    return json.dumps(obj, indent=2, allow_nan=False)


def setup_jax() -> None:
    """float64 for this process (the CLI's numbers match the reference tools to the last digit)
    and the persistent compilation cache, its warnings as one line each on stderr."""
    import jax

    jax.config.update("jax_enable_x64", True)
    from ..runtime import enable_compilation_cache

    with warnings.catch_warnings(record=True) as caught:  # one line each, no source excerpt
        warnings.simplefilter("always", RuntimeWarning)
        enable_compilation_cache()  # a second run loads its programs from disk
    for warning in caught:
        message = str(warning.message).removeprefix("bayesrank: ")
        print(f"bayesrank: warning: {message}", file=sys.stderr)


def data_path(path):
    """``path``, or the bundled sample's LETOR file for ``sample`` (where no file of that name
    exists) or ``None``."""
    from pathlib import Path

    from ..data.sample import sample_path

    if path is None or (str(path) == "sample" and not Path("sample").exists()):
        return sample_path()
    return Path(path)


def plural(count: int, one: str, many: str | None = None) -> str:
    """``"1 query"``, ``"2 queries"``: ``count`` and the noun in its number (``many``: the
    plural where it is not ``one + "s"``)."""
    return f"{count} {one if count == 1 else (many or one + 's')}"


#: A person's replies at a session's prompt: the key typed -> the session's word for it.
REPLIES = {"1": "first", "2": "second", "s": "skip", "u": "undo", "q": "stop"}


def read_reply() -> str | None:
    """One reply from standard input (``REPLIES``' values; the end of input is ``"stop"``), or
    None, after saying so, for anything else."""
    try:
        reply = input("answer 1 or 2, s (skip), u (undo), q (stop): ").strip().lower()
    except EOFError:
        print()  # the prompt's line ends
        return "stop"
    if reply not in REPLIES:
        print(f"not an answer: {reply!r}")
    return REPLIES.get(reply)


def interact(session, k: int, prompt: str, show) -> None:
    """Ask a person at the terminal about ``session.question()`` (an
    ``active.interactive.InteractiveSession``) until it holds ``k`` answers, nothing is left to
    ask, or the person stops; ``prompt``: the question asked of each pair, ``show(question)``:
    the pair as text (lines, each ending in a newline). Each reply (``read_reply``) is an
    answer, a skip, an undo or the end. A session resumed from its answers file says first
    what it replayed."""
    if session.log:
        answers = len(session.pairs)
        skips = len(session.log) - answers
        print(f"resumed from {session.path}: {plural(len(session.log), 'entry', 'entries')} "
              f"replayed ({plural(answers, 'answer')}, {plural(skips, 'skip')})")  # fmt: skip
    while len(session.pairs) < k:
        question = session.question()
        if question is None:
            print("every pair has been asked")
            break
        print(f"pair {len(session.pairs) + 1} of {k}: {prompt}")
        print(show(question), end="")
        choice = read_reply()
        if choice == "stop":
            break
        if choice == "undo":
            print("undone" if session.undo() else "nothing to undo")
        elif choice is not None:
            session.reply(question, choice)
    print(f"{len(session.pairs)} answers in {session.path}")
