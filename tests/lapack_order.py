"""Batched LAPACK calls that a compiled program may run side by side.

jaxlib 0.10's CPU LAPACK kernels split a batched call (a Cholesky factorisation, a triangular
solve or an eigendecomposition under ``vmap``) over XLA's intra-op thread pool and block until
the pieces finish; when as many such calls run at once as the pool has threads, every thread
waits on work queued behind it and the program hangs (docs/development/implementation.md).
XLA's CPU runtime may run two instructions at once only when no chain of operands orders them,
so a program is safe from this deadlock when its batched LAPACK calls are totally ordered.

``side_by_side`` reads the optimized HLO text of a compiled program
(``jitted.lower(...).compile().as_text()``) and returns each pair of instructions in one
computation that both hold a batched LAPACK call (as the custom call itself, or inside a loop,
branch or call they run) and that no chain of operands orders.

``install`` (conftest) applies it to every program the test run compiles or loads from the
cache: a program with such a pair fails the test that built it, naming the pair's source lines.
Inspecting the compiled program changes nothing in it. The hook wraps JAX's internal
``jax._src.compiler.compile_or_get_cached``; where a JAX version lacks it, the run says so and
goes on unchecked.
"""

from __future__ import annotations

import re
import warnings
from contextlib import contextmanager

_HEADER = re.compile(r"^(?:ENTRY\s+)?%([\w.\-]+)\s.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+)\s*=\s*(.*)$")
_NAME = re.compile(r"%([\w.\-]+)")
_LAPACK = re.compile(r'custom_call_target="lapack_\w+"')
_BATCH_DIMS = re.compile(r'num_batch_dims="(\d+)"')
_SHAPE = re.compile(r"^\(?\w+\[([\d,]*)\]")


def computations(hlo: str) -> dict[str, dict[str, tuple[str, list[str]]]]:
    """``{computation: {instruction: (text after '=', names it mentions)}}``."""
    out, current = {}, None
    for line in hlo.splitlines():
        if current is None:
            header = _HEADER.match(line)
            if header:
                current = out.setdefault(header.group(1), {})
            continue
        if line.strip() == "}":
            current = None
            continue
        inst = _INSTRUCTION.match(line)
        if inst:
            rhs = inst.group(2)
            current[inst.group(1)] = (rhs, _NAME.findall(rhs))
    return out


def _batched_lapack(rhs: str) -> bool:
    """A LAPACK custom call whose leading (batch) dimensions hold more than one matrix."""
    if not _LAPACK.search(rhs):
        return False
    dims = _BATCH_DIMS.search(rhs)
    shape = _SHAPE.match(rhs)
    if dims is None or shape is None:
        return True  # unknown: count it
    sizes = [int(s) for s in shape.group(1).split(",") if s]
    batch = 1
    for s in sizes[: int(dims.group(1))]:
        batch *= s
    return batch > 1


def side_by_side(hlo: str) -> list[tuple[str, str, str]]:
    """``(computation, a, b)`` for each unordered pair of instructions holding batched LAPACK
    calls (module docstring); empty when the program's batched calls are totally ordered."""
    comps = computations(hlo)
    holds_memo: dict[str, bool] = {}

    def comp_holds(name: str) -> bool:
        if name not in holds_memo:
            holds_memo[name] = False  # a cycle cannot occur in HLO; guards the recursion
            holds_memo[name] = any(inst_holds(name, i) for i in comps[name])
        return holds_memo[name]

    def inst_holds(comp: str, inst: str) -> bool:
        rhs, names = comps[comp][inst]
        return _batched_lapack(rhs) or any(comp_holds(n) for n in names if n in comps)

    pairs = []
    for comp, insts in comps.items():
        holding = [i for i in insts if inst_holds(comp, i)]
        if len(holding) < 2:
            continue
        ancestors = {i: _ancestors(insts, i) for i in holding}
        for k, a in enumerate(holding):
            for b in holding[k + 1 :]:
                if a not in ancestors[b] and b not in ancestors[a]:
                    pairs.append((comp, a, b))
    return pairs


def _ancestors(insts: dict, start: str) -> set[str]:
    """Every instruction ``start`` depends on, through operands or control predecessors."""
    seen, stack = set(), [start]
    while stack:
        for name in insts[stack.pop()][1]:
            if name in insts and name not in seen:
                seen.add(name)
                stack.append(name)
    return seen


_allowed = [0]


@contextmanager
def allowed():
    """Inside the block, compiled programs are not checked (the checker's own tests build
    unordered programs on purpose)."""
    _allowed[0] += 1
    try:
        yield
    finally:
        _allowed[0] -= 1


def install() -> None:
    """Check every program this process compiles or loads from now on (module docstring)."""
    try:
        from jax._src import compiler

        original = compiler.compile_or_get_cached
    except (ImportError, AttributeError):
        warnings.warn(
            "tests/lapack_order.py: this JAX has no compile_or_get_cached to wrap; compiled "
            "programs are not checked for unordered LAPACK calls",
            stacklevel=2,
        )
        return

    def checked(*args, **kwargs):
        executable = original(*args, **kwargs)
        if not _allowed[0]:
            text = executable.hlo_modules()[0].to_string()
            if 'custom_call_target="lapack_' in text:
                pairs = side_by_side(text)
                if pairs:
                    raise AssertionError(describe(text, pairs))
        return executable

    compiler.compile_or_get_cached = checked


def describe(hlo: str, pairs) -> str:
    """A message naming the program and, for each unordered pair, where its calls come from."""
    where = _locations(hlo)
    lines = sorted({" || ".join(sorted((where(a), where(b)))) for _, a, b in pairs})
    name = hlo.split(",", 1)[0].split()[-1]
    return (
        f"{name}: {len(pairs)} pair(s) of batched LAPACK calls that may run side by side and "
        "deadlock jaxlib 0.10's CPU thread pool; chain them with bayesrank.runtime.after:\n  "
        + "\n  ".join(lines[:10])
    )


def _locations(hlo: str):
    """``instruction -> "file:line > file:line"`` (innermost frames first) from the HLO text's
    stack-frame tables."""
    lines = hlo.splitlines()

    def table(title):
        if title not in lines:
            return []
        out = []
        for line in lines[lines.index(title) + 1 :]:
            if not line[:1].isdigit():
                break
            out.append(line)
        return out

    files = dict(line.split(" ", 1) for line in table("FileNames"))
    places, frames = {}, {}
    for line in table("FileLocations"):
        m = re.match(r"(\d+) \{file_name_id=(\d+) function_name_id=\d+ line=(\d+)", line)
        if m:
            file = files[m[2]].strip('"').rsplit("/", 1)[-1]
            places[m[1]] = f"{file}:{m[3]}"
    for line in table("StackFrames"):
        m = re.match(r"(\d+) \{file_location_id=(\d+)(?: parent_frame_id=(\d+))?", line)
        if m:
            frames[m[1]] = (m[2], m[3])

    def where(name):
        m = re.search(r"%" + re.escape(name) + r" = .*?stack_frame_id=(\d+)", hlo)
        frame, out = (m[1] if m else None), []
        while frame in frames and len(out) < 3:
            place, parent = frames[frame]
            out.append(places.get(place, "?"))
            frame = None if parent == frame else parent
        return " > ".join(out) or name

    return where
