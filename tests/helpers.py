"""Helpers shared by the tests: counting XLA compilations (not timing them)."""

from __future__ import annotations

from contextlib import contextmanager

import jax

#: The monitoring event JAX records once per program it compiles (eager operations included),
#: also when the program is loaded from the persistent compilation cache instead ...
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
#: ... which it records as a cache hit.
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"

_active: list[list[int]] = []
_registered = False


def _listener(name, _duration, **_kwargs):
    if name == COMPILE_EVENT:
        for counter in _active:
            counter[0] += 1


def _hit_listener(name, **_kwargs):
    if name == CACHE_HIT_EVENT:
        for counter in _active:
            counter[1] += 1


@contextmanager
def count_compilations():
    """``with count_compilations() as n: ...``; afterwards ``n[0]`` is the number of programs
    the block did not find in the process's memory (jitted functions and eager operations
    alike): compiled by XLA, or loaded from the persistent compilation cache, which the tests
    turn on (conftest); ``n[1]`` is how many of those were loaded. "A second call compiles
    nothing" is ``n[0] == 0`` whether or not the cache is on; ``n[0] - n[1]`` were compiled."""
    global _registered
    if not _registered:
        jax.monitoring.register_event_duration_secs_listener(_listener)
        jax.monitoring.register_event_listener(_hit_listener)
        _registered = True
    counter = [0, 0]
    _active.append(counter)
    try:
        yield counter
    finally:
        _active.remove(counter)
