"""The designs face under careless input (issue 49): preferential optimisation's oracle replies,
design pools, designs and their cube, and the sizes and counts of the session, the search and
the compiled loop, each refused with a ``ValueError`` that names what is at fault or taken
exactly; never an inverted answer, never another exception.

References: the test's own reading of each input (what a flag, a design in ``[0, 1]^d``, a
pool of distinct designs, a count is), never the library's checks. Cheap: every property runs
before any proposal is fitted (the first pair is random, a skip fits nothing, a refused input
stops before compiling); one slow test compiles one program to see answers recorded.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bayesrank.active.designs import loop, search
from bayesrank.active.designs.loop import Settings
from bayesrank.active.designs.session import DesignSession, optimize
from bayesrank.active.session import ANSWERS, Session, ask, oracle_answer
from bayesrank.cli import main

pytestmark = pytest.mark.float32  # dtype-aware: also run with x64 off in CI

FUZZ = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
#: Small optimiser settings; ``learn_every=0``: the one compiled program has no learning.
SETTINGS = Settings(n_raw=8, n_starts=1, steps=1, learn_every=0, n_mc=8)
DTYPE = np.dtype(jnp.result_type(float))


# --- oracle replies -------------------------------------------------------------------------------

#: Replies that are not a flag, a skip or an answer word: every one must be refused.
NOT_REPLIES = st.one_of(
    st.integers(-3, 3),  # 0 / 1 included: truth value, winner's index or the prompt's key?
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8).filter(lambda s: s not in ANSWERS),
    st.sampled_from(["First", " first", "1", "2", "yes", b"first", np.str_("Second")]),
    st.lists(st.booleans(), max_size=2),
    st.tuples(st.booleans()),
    st.builds(np.array, st.lists(st.booleans(), min_size=1, max_size=2)),  # bool with dims
    st.sampled_from([np.int64(1), np.float64(np.nan), np.float32(0.5), 1j, {}, object()]),
)


def _reading(reply):
    """The test's own reading of a reply: the answer, or None where it must be refused."""
    if reply is None:
        return "skip"
    if isinstance(reply, str):
        return str(reply) if reply in ANSWERS else None
    if isinstance(reply, bool | np.bool_):
        return "first" if reply else "second"
    if isinstance(reply, np.ndarray | jax.Array) and reply.shape == () and reply.dtype == bool:
        return "first" if bool(reply) else "second"
    return None


#: Replies that stand for an answer, in every form an oracle may compute one.
REPLIES = st.one_of(
    st.none(),
    st.booleans(),
    st.builds(np.bool_, st.booleans()),
    st.builds(lambda b: np.array(b), st.booleans()),  # 0-d bool array
    st.sampled_from(ANSWERS),
    st.builds(np.str_, st.sampled_from(ANSWERS)),
)


@FUZZ
@given(reply=st.one_of(REPLIES, NOT_REPLIES))
def test_a_reply_is_a_flag_a_skip_or_an_answer_word(reply):
    """Input classes: None; Python bool; NumPy bool; 0-d bool array; answer word (str and
    np.str_); int (0/1 too); float (NaN, inf); other string; bytes; list or tuple; bool array
    with dimensions; NumPy number; complex, dict, object."""
    expected = _reading(reply)
    if expected is None:
        with pytest.raises(ValueError, match="iteration 3") as err:
            oracle_answer(reply, "optimize, iteration 3")
        assert type(reply).__name__ in str(err.value)
    else:
        assert oracle_answer(reply, "optimize, iteration 3") == expected
    assert oracle_answer(jnp.asarray(True), "x") == "first"  # JAX's f(a) > f(b)


@FUZZ
@given(reply=st.one_of(st.none(), NOT_REPLIES))
def test_optimize_refuses_a_reply_it_cannot_read_and_records_nothing(reply):
    """Input classes: NOT_REPLIES' (int, float, string, bytes, list, tuple, bool array with
    dimensions, NumPy number, complex, dict, object) and None (every question skipped)."""
    calls = []

    def oracle(a, b):
        calls.append(1)
        return reply

    if reply is None:
        session = optimize(oracle, 2, 1, settings=SETTINGS, n_init=20)
        assert len(calls) == 10 and [r for *_, r in session.log] == ["skip"] * 10
        return
    with pytest.raises(ValueError, match=r"optimize, iteration 0: the oracle replied") as err:
        optimize(oracle, 2, 1, settings=SETTINGS, n_init=20)
    assert type(reply).__name__ in str(err.value) and len(calls) == 1


def test_an_oracle_that_replies_nan_or_second_is_not_recorded_as_first():
    """The issue's case: NaN and ``1`` (truthy) were recorded as "first"; refused now."""
    for reply, shown in [(float("nan"), "nan of type float"), (1, "1 of type int")]:
        with pytest.raises(ValueError, match=rf"iteration 0: the oracle replied {shown}"):
            optimize(lambda a, b, r=reply: r, 1, 1, settings=SETTINGS)
    with pytest.raises(ValueError, match="oracle must be a callable"):
        optimize("first", 1, 1, settings=SETTINGS)


@pytest.mark.slow  # compiles one proposal program
def test_optimize_records_each_reply_as_the_oracle_meant_it():
    replies = iter(["second", True, np.False_, "first", None, np.array(False), jnp.asarray(True)])
    session = optimize(lambda a, b: next(replies), 1, 6, settings=SETTINGS, n_init=2)
    assert [r for *_, r in session.log] == [
        "second", "first", "second", "first", "skip", "second", "first"]  # fmt: skip
    # winner first, rows of X in the order shown: "second" puts b (row 1) first
    np.testing.assert_array_equal(session.pairs[:2], [[1, 0], [2, 3]])


def test_the_pool_session_refuses_an_unreadable_reply_too():
    K = np.eye(3)
    candidates = np.array([[0, 1], [1, 2]])
    with pytest.raises(ValueError, match=r"ask, question 0 .*replied 0 of type int"):
        ask(K, candidates, lambda i, j: 0, 1)


@pytest.mark.parametrize("k", ["2", 1.5, True, -1, None])
def test_the_pool_session_names_a_count_of_questions_that_is_not_one(k):
    """``ask(k="2")`` raised Python's TypeError from the comparison with a count."""
    with pytest.raises(ValueError, match=r"\bk must be"):
        ask(np.eye(3), np.array([[0, 1], [1, 2]]), lambda i, j: True, k)


# --- design pools ---------------------------------------------------------------------------------

#: Coordinates a pool may hold: a few in the cube (so rows repeat), its edges, and outside.
COORDS = st.sampled_from([0.0, 0.25, 1.0, -0.0, 0.5, -0.1, 1.5, math.nan, math.inf, True, 1])


def _pool_fault(pool, dim):
    """The test's own reading of a pool of ``dim``-wide designs: None if valid, else a regex of
    the fault (checked in this order: shape, size, each row's values, repeats)."""
    if any(len(row) != dim for row in pool) or not pool:
        return r"pool must be a \(p, 2\) array"
    if len(pool) < 2:
        return "at least 2 designs"
    for i, row in enumerate(pool):
        if any(isinstance(v, bool) for v in row):
            return rf"pool\[{i}\] must hold numbers"
        for k, v in enumerate(row):
            if not 0.0 <= v <= 1.0:
                return rf"pool\[{i}\]\[{k}\] = {v!r} is outside the unit cube"
    seen = {}
    for i, row in enumerate(pool):
        key = tuple(float(DTYPE.type(v)) for v in row)
        if key in seen:
            return rf"pool\[{i}\] = .* repeats pool\[{seen[key]}\]"
        seen[key] = i
    return None


@FUZZ
@given(pool=st.lists(st.lists(COORDS, min_size=1, max_size=3), max_size=4))
@example(pool=[[0.0, 1.0], [0.25, 1], [1.0, -0.0]])  # valid: taken exactly
@example(pool=[[0.5, 0.5], [0.5, 0.5], [0.25, 0.5]])  # one repeat among distinct designs
def test_a_pool_is_refused_naming_its_fault_or_taken_exactly(pool):
    """Input classes: empty pool; one design; rows of the wrong width (narrow, wide, ragged);
    bools; NaN; inf; below 0; above 1; the cube's edges and -0.0; repeated designs (all the
    same, or some); ints; a valid pool."""
    fault = _pool_fault(pool, 2)
    if fault is not None:
        with pytest.raises(ValueError, match=fault):
            DesignSession(2, settings=SETTINGS, pool=pool, pool_mode="pool")
        return
    session = DesignSession(2, settings=SETTINGS, pool=pool, pool_mode="pool")
    np.testing.assert_array_equal(session.pool, np.asarray(pool, np.float64))
    p = len(pool)
    assert [tuple(c) for c in session.candidates] == [
        (i, j) for i in range(p) for j in range(i + 1, p)]  # fmt: skip


def test_a_pool_of_one_design_repeated_is_refused_up_front():
    """The issue's case: accepted, then the session refused its own proposal."""
    with pytest.raises(ValueError, match=r"pool\[1\] = \(0\.5, 0\.5\) repeats pool\[0\]"):
        DesignSession(2, settings=SETTINGS, pool=[[0.5, 0.5], [0.5, 0.5]], pool_mode="pool")
    for pool in [[], np.zeros((0, 2)), 0.5, [[0.1, 0.2], [0.3]], np.zeros((2, 2, 2))]:
        with pytest.raises(ValueError, match="pool must"):
            DesignSession(2, settings=SETTINGS, pool=pool)
    for pool in [[["0.1", "0.2"], ["0.3", "0.4"]], [[0.1j, 0.2], [0.3, 0.4]]]:
        with pytest.raises(ValueError, match=r"pool\[0\] must be a design of 2 numbers"):
            DesignSession(2, settings=SETTINGS, pool=pool)
    with pytest.raises(ValueError, match="pool_mode 'pool' proposes designs of a pool"):
        DesignSession(2, settings=SETTINGS, pool_mode="pool")
    with pytest.raises(ValueError, match="pool_mode must be"):
        DesignSession(2, settings=SETTINGS, pool_mode="cube")


def test_designs_equal_in_the_working_precision_are_one_design():
    """Distinct float64 designs that the working dtype rounds together (float32 only)."""
    x = 0.1
    y = float(np.nextafter(np.float64(x), 1.0))
    equal = DTYPE.type(x) == DTYPE.type(y)
    session = DesignSession(1, settings=SETTINGS, n_init=5)
    if equal:
        with pytest.raises(ValueError, match="repeats pool"):
            DesignSession(1, settings=SETTINGS, pool=[[x], [y]])
        with pytest.raises(ValueError, match=r"same design in the working precision"):
            session.answer([x], [y], "skip")
    else:
        assert len(DesignSession(1, settings=SETTINGS, pool=[[x], [y]]).pool) == 2
        session.answer([x], [y], "skip")
        assert session.log[0][0][0] == x and session.log[0][1][0] == y


# --- designs and the cube -------------------------------------------------------------------------


@FUZZ
@given(a=st.lists(COORDS, min_size=1, max_size=3), b=st.lists(COORDS, min_size=1, max_size=3))
@example(a=[0.25, 1], b=[1.0, -0.0])  # valid: taken exactly
def test_a_design_outside_the_cube_is_refused_naming_it_or_taken_exactly(a, b):
    """Input classes (each of ``a`` and ``b``): wrong length; bools; NaN; inf; below 0; above
    1; edges and -0.0; ints; ``a == b``; two valid designs (taken as a skip, exactly)."""
    session = DesignSession(2, settings=SETTINGS, n_init=5)
    fault = None
    for name, x in (("a", a), ("b", b)):
        if fault is None and any(isinstance(v, bool) for v in x):
            fault = rf"{name} must hold numbers"
        elif fault is None and len(x) != 2:
            fault = rf"{name} must have 2 values"
        elif fault is None:
            bad = [k for k, v in enumerate(x) if not 0.0 <= v <= 1.0]
            fault = rf"{name}\[{bad[0]}\] = .* is outside the unit cube" if bad else None
    if fault is None and [float(DTYPE.type(v)) for v in a] == [float(DTYPE.type(v)) for v in b]:
        fault = "same design"
    if fault is not None:
        with pytest.raises(ValueError, match=fault):
            session.answer(a, b, "skip")
        assert session.log == []
        return
    session.answer(a, b, "skip")
    (got_a, got_b, reply), = session.log
    assert got_a.tolist() == [float(v) for v in a] and got_b.tolist() == [float(v) for v in b]
    assert reply == "skip"


# --- sizes and counts -----------------------------------------------------------------------------

#: What a user may pass for a count: the edges of every type.
COUNTS = st.one_of(
    st.integers(-2, 3),
    st.sampled_from([0.0, 1.0, 2.5, math.nan, True, False, None, "2", np.int64(2), np.float64(2)]),
)


def _count_ok(value, low: int) -> bool:
    """The test's own reading: an integer (Python or NumPy, not bool) at least ``low``."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool) and value >= low


@FUZZ
@given(dim=COUNTS, k=COUNTS, n_init=COUNTS)
def test_dim_k_and_n_init_are_counts(dim, k, n_init):
    """Input classes (each of dim, k, n_init): negative; 0; positive; float (whole or not,
    NaN); bool; None; string; NumPy integer; NumPy float."""
    faults = [name for name, value, low in (("k", k, 0), ("dim", dim, 1), ("n_init", n_init, 0))
              if not _count_ok(value, low)]  # fmt: skip
    if faults:
        with pytest.raises(ValueError, match=rf"^{faults[0]} must be"):
            optimize(lambda a, b: None, dim, k, settings=SETTINGS, n_init=n_init)
        return
    if n_init <= 10 * k:  # a proposal would be fitted: left to the slow tests
        return
    session = optimize(lambda a, b: None, dim, k, settings=SETTINGS, n_init=n_init)
    assert session.dim == dim and len(session.log) == 10 * k  # every question skipped


#: The Settings fields that are counts, with their least value.
COUNT_FIELDS = {"learn_every": 0, "learn_steps": 0, "n_raw": 1, "n_starts": 1, "steps": 0,
                "n_mc": 1, "nuts_warmup": 0, "nuts_samples": 1}  # fmt: skip


#: The stated upper bounds of the sizes (Settings' docstring): arrays a proposal allocates.
COUNT_MAX = {"n_raw": 2**14, "n_mc": 2**14, "nuts_samples": 2**14, "steps": 10**6,
             "learn_steps": 10**6, "nuts_warmup": 10**8}  # fmt: skip
#: Sizes at and past those bounds, up to what no memory holds (issue 49: 2**40 candidates).
HUGE = st.sampled_from([2**14, 2**14 + 1, 10**6, 10**6 + 1, 10**8 + 1, 2**40, 2**64])


@FUZZ
@given(field=st.sampled_from(sorted(COUNT_FIELDS)), value=st.one_of(COUNTS, HUGE))
@example(field="n_raw", value=2**40)  # issue 49: RESOURCE_EXHAUSTED at the first answer
@example(field="n_mc", value=2**40)
def test_every_count_in_settings_is_checked(field, value):
    """Input classes: COUNTS' nine and huge sizes (at a bound, one past it, far past it), in
    each of the eight count fields of ``Settings`` (the NUTS ones among them); ``n_starts``
    above ``n_raw``."""
    options = {field: value}
    ok = _count_ok(value, COUNT_FIELDS[field])
    if field == "n_starts" and ok and value > SETTINGS.n_raw:
        ok = False
    if ok and value > COUNT_MAX.get(field, math.inf):
        ok = False
    s = SETTINGS._replace(**options)
    if not ok:
        with pytest.raises(ValueError, match=rf"settings\.{field} must be"):
            DesignSession(1, settings=s)
        with pytest.raises(ValueError, match=rf"settings\.{field} must be"):
            loop.check_settings(s)
        return
    assert DesignSession(1, settings=s).settings == s


@pytest.mark.parametrize(
    ("options", "named"),
    [({"n_raw": 2**14, "n_starts": 1, "n_mc": 2**11}, "n_mc"),
     ({"n_raw": 2**13, "n_mc": 2**12, "acquisition": "qeubo"}, "n_mc"),
     ({"n_raw": 2**12, "nuts_samples": 2**13, "engine": "nuts"}, "nuts_samples")],
)  # fmt: skip
def test_candidates_times_samples_is_bounded(options, named):
    """Issue 49: n_raw = 2**40 (or n_mc = 2**40 for qeubo) was RESOURCE_EXHAUSTED at the first
    answer. Each within its bound, their product (candidates scored against samples, 2**25
    here, over the stated 2**24) is refused naming both, before anything runs; at 2**24 taken."""
    s = SETTINGS._replace(**options)
    with pytest.raises(ValueError, match=rf"settings\.n_raw \* settings\.{named} = "):
        DesignSession(1, settings=s)
    at_bound = s._replace(**{named: options[named] // 2})
    assert DesignSession(1, settings=at_bound).settings == at_bound


SEARCH_SIZES = {"q": 1, "dim": 1, "n_raw": 1, "n_starts": 1, "steps": 0}


@FUZZ
@given(field=st.sampled_from(sorted(SEARCH_SIZES)), value=COUNTS)
def test_the_search_refuses_a_size_before_compiling(field, value):
    """Input classes: COUNTS' nine, in each of ``maximize``'s five sizes (one wrong at a time;
    ``n_starts`` above ``n_raw`` too); the valid ones are left to ``test_designs.py``."""
    sizes = {"q": 2, "dim": 1, "n_raw": 4, "n_starts": 2, "steps": 1, field: value}
    name = field
    if _count_ok(value, SEARCH_SIZES[field]):
        if field == "n_starts" and value > sizes["n_raw"]:
            pass  # named as n_starts
        elif field == "n_raw" and value < sizes["n_starts"]:
            name = "n_starts"  # fewer candidates than starts: the starts are named
        else:
            return  # valid: left to test_designs.py (each shape compiles)
    q, dim = sizes.pop("q"), sizes.pop("dim")
    with pytest.raises(ValueError, match=rf"^{name} must be"):
        search.maximize(lambda X: jnp.sum(X), jax.random.PRNGKey(0), q, dim, **sizes)


@pytest.mark.parametrize("k", [-1, 1.5, True, None])
def test_the_compiled_loop_refuses_k_and_shapes_while_tracing(k):
    utility = lambda x: -jnp.sum((x - 0.3) ** 2, -1)  # noqa: E731
    X_init = np.full((1, 1, 2, 1), 0.2)
    theta, keys = np.zeros(2), jax.random.PRNGKey(0)[None]
    with pytest.raises(ValueError, match="k must be a non-negative integer"):
        loop.run_batch(utility, X_init, np.full((1, 3), 0.5), keys, 0.1, theta, k=k,
                       settings=SETTINGS)  # fmt: skip
    with pytest.raises(ValueError, match=r"uniforms must have shape \(n_init \+ k,\) = \(3,\)"):
        loop.run_batch(utility, X_init, np.full((1, 4), 0.5), keys, 0.1, theta, k=2,
                       settings=SETTINGS)  # fmt: skip
    with pytest.raises(ValueError, match=r"settings\.n_starts must be an integer in \[1, 8\]"):
        loop.run_batch(utility, X_init, np.full((1, 3), 0.5), keys, 0.1, theta, k=2,
                       settings=SETTINGS._replace(n_starts=9))  # fmt: skip


# --- files and the command line -------------------------------------------------------------------


#: Answer-file lines neither session can read, by class (each line a JSON text or not).
NESTED = "[" * 100_000 + "]" * 100_000  # issue 49: json.loads' RecursionError
BAD_DESIGN_LINES = {
    "nested a": '{"a": ' + NESTED + ', "b": [0.2], "answer": "first"}',
    "nested line": NESTED,
    "not JSON": '{"a": [0.1], "b": [0.2], "answer": first}',
    "not an object": "[0.1, 0.2]",
    "missing key": '{"a": [0.1], "answer": "first"}',
    "bad answer": '{"a": [0.1], "b": [0.2], "answer": "1"}',
    "design out of cube": '{"a": [1.5], "b": [0.2], "answer": "first"}',
}
BAD_POOL_LINES = {
    "nested i": '{"i": ' + NESTED + ', "j": 1, "answer": "first"}',
    "nested line": NESTED,
    "fractional i": '{"i": 1.5, "j": 2, "answer": "first"}',  # int() made it 1
    "infinite i": '{"i": Infinity, "j": 2, "answer": "first"}',  # int(): OverflowError
    "bool i": '{"i": true, "j": 2, "answer": "first"}',  # int(): 1, the pair (1, 2)
    "string i": '{"i": "1", "j": 2, "answer": "first"}',  # int(): 1
    "missing key": '{"i": 1, "answer": "first"}',
    "not a candidate": '{"i": 0, "j": 2, "answer": "first"}',
    "bad answer": '{"i": 1, "j": 2, "answer": "yes"}',
}


@pytest.mark.parametrize("kind", sorted(BAD_DESIGN_LINES))
def test_a_design_answer_file_names_its_line(tmp_path, kind):
    """The second line of each class is refused naming the file and line 2 (the first, valid,
    is read; it is a random pair: nothing fitted)."""
    path = tmp_path / "answers.jsonl"
    good = '{"a": [0.1], "b": [0.2], "answer": "skip"}'
    path.write_text(f"{good}\n{BAD_DESIGN_LINES[kind]}\n")
    with pytest.raises(ValueError, match=rf"^{path}, line 2: "):
        DesignSession(1, settings=SETTINGS, answers=path, n_init=5)


@pytest.mark.parametrize("kind", sorted(BAD_POOL_LINES))
def test_a_pool_answer_file_names_its_line(tmp_path, kind):
    """The pool session's replay, line 2 of each class (refused before anything is fitted)."""
    path = tmp_path / "answers.jsonl"
    path.write_text(f'{{"i": 0, "j": 1, "answer": "first"}}\n{BAD_POOL_LINES[kind]}\n')
    with pytest.raises(ValueError, match=rf"^{path}, line 2: "):
        Session(np.eye(3), np.array([[0, 1], [1, 2]]), answers=path)


def test_an_answer_file_that_is_not_text_names_itself(tmp_path):
    path = tmp_path / "answers.jsonl"
    path.write_bytes(b'{"a": [0.1], "b": [0.2], "answer": "skip"}\n\xff\xfe\n')
    with pytest.raises(ValueError, match=rf"{path}: not a UTF-8 text file"):
        DesignSession(1, settings=SETTINGS, answers=path)


def test_the_command_line_names_a_bad_pool_seed_or_describe(tmp_path, capsys, monkeypatch):
    argv = ["optimize", "--dim", "2", "--function", "quadratic", "--k", "0"]
    pool = tmp_path / "pool.csv"
    pool.write_text("# mine\n0.5, 0.5\n0.1, 0.2\n0.5,0.5\n")
    assert main([*argv, "--pool", str(pool)]) == 2
    assert f"{pool}, line 4: the design '0.5,0.5' repeats line 2" in capsys.readouterr().err
    pool.write_bytes(b"0.5, 0.5\n\xff\n")
    assert main([*argv, "--pool", str(pool)]) == 2
    assert f"--pool {str(pool)!r}: not a UTF-8 text file" in capsys.readouterr().err
    for seed in ["-1", str(2**70)]:
        with pytest.raises(SystemExit) as stop:
            main([*argv, "--seed", seed])
        assert stop.value.code == 2
        assert f"--seed: must be an integer in [0, {2**63 - 1}], got {seed}" in (
            capsys.readouterr().err)  # fmt: skip
    assert main([*argv, "--pool-mode", "pool"]) == 2
    assert "--pool-mode pool proposes designs of a pool: give --pool" in capsys.readouterr().err
    answers = tmp_path / "answers.jsonl"
    interactive = ["optimize", "--dim", "1", "--interactive", "--answers", str(answers)]
    for command, says in [("'unclosed", "cannot split it"), (str(tmp_path / "nothing"),
                                                               "cannot run it")]:  # fmt: skip
        monkeypatch.setattr("sys.stdin", __import__("io").StringIO("1\n"))
        assert main([*interactive, "--describe", command]) == 2
        assert f"--describe {command!r}: {says}" in capsys.readouterr().err
    assert not answers.exists()
