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
            counter[0] -= 1  # loaded from disk, not compiled
            counter[1] += 1


@contextmanager
def count_compilations():
    """``with count_compilations() as n: ...``; afterwards ``n[0]`` is the number of programs
    XLA compiled inside the block (jitted functions and eager operations alike) and ``n[1]`` the
    number loaded from the persistent compilation cache instead."""
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
