"""The study's child processes, and that none outlives an interrupted parent.

``Children`` runs commands from worker threads (``Children.run``) and remembers the
live ones. Used as a context manager (entered in the main thread), it turns ``SIGTERM`` into
``KeyboardInterrupt`` (restored afterwards); ``Children.each`` runs the tasks that start the
children, some threads at a time, and on any exception, Ctrl-C included, terminates every live
child (``SIGTERM``, then ``SIGKILL`` after a grace period) and refuses to start new ones before
it waits for its threads. As a last guard, a child asks the Linux kernel to send it ``SIGTERM``
when its parent dies (``die_with_parent``), which also covers a parent killed by ``SIGKILL``.

Why the main thread never blocks for long: Python runs signal handlers only in the main thread,
between bytecodes, but the kernel may deliver a process's signal to any of its threads (it
prefers the main one, not always: under load a worker thread reading a child's output can
take it). A main thread blocked in a lock until the tasks end would then not see Ctrl-C until
the children finished on their own, hours later. ``each`` waits in slices of ``POLL`` seconds,
so a handler runs within one slice whichever thread the signal reached.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

__all__ = ["POLL", "Children", "die_with_parent"]

#: Seconds the main thread waits at a time for its worker threads (see the module docstring).
POLL = 0.2


class Children:
    """Child processes run from threads, all stopped when the parent is interrupted."""

    def __init__(self, grace: float = 5.0):
        self.grace = grace
        self._live: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self._stopping = False
        self._previous = None

    def run(self, command: list[str], on_line=None, first: str | None = None):
        """Run ``command`` to its end: ``(returncode, stdout, stderr)``, ``on_line(text)``
        called with each line of its stdout as it comes; ``RuntimeError`` once the children are
        being stopped.

        A conversation, where ``first`` is given: ``first`` is the child's first line of
        stdin, and each string ``on_line`` returns is its next (``""`` closes its stdin, the
        child's cue to end; ``None`` sends nothing)."""
        with tempfile.TemporaryFile("w+") as err_file:  # stderr apart: no pipe to deadlock on
            with self._lock:
                if self._stopping:
                    raise RuntimeError("interrupted: no new child process")
                env = dict(os.environ, BAYESRANK_PARENT_PID=str(os.getpid()))
                process = subprocess.Popen(
                    command,
                    stdin=None if first is None else subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err_file,
                    text=True,
                    env=env,
                )
                self._live.add(process)
            lines = []
            try:
                if first is not None:
                    _send(process, first)
                for text in process.stdout:
                    lines.append(text)
                    reply = None if on_line is None else on_line(text.rstrip("\n"))
                    if reply is not None and first is not None:
                        _send(process, reply)
                process.wait()
            finally:
                process.stdout.close()
                if process.stdin is not None and not process.stdin.closed:
                    process.stdin.close()
                with self._lock:
                    self._live.discard(process)
            err_file.seek(0)
            return process.returncode, "".join(lines), err_file.read()

    def stop(self) -> None:
        """Terminate every live child and start no new one."""
        with self._lock:
            self._stopping = True
            live = list(self._live)
        for process in live:
            process.terminate()
        for process in live:
            try:
                process.wait(self.grace)
            except subprocess.TimeoutExpired:
                process.kill()

    def each(self, fn, tasks, threads: int) -> None:
        """``fn(task)`` for every task: in this thread one after another (``threads=0``), or
        ``threads`` worker threads at a time. The first exception (``KeyboardInterrupt``
        included) stops every child, cancels the tasks not started and is raised once the
        threads have ended."""
        if threads == 0:
            for task in tasks:
                fn(task)
            return
        with ThreadPoolExecutor(max_workers=threads) as pool:
            try:
                pending = [pool.submit(fn, task) for task in tasks]
                while pending:
                    done, pending = wait(pending, timeout=POLL, return_when=FIRST_EXCEPTION)
                    for future in done:
                        future.result()  # the first failure, raised here
            except BaseException:
                self.stop()  # before the pool waits for threads that wait for children
                pool.shutdown(wait=False, cancel_futures=True)
                raise

    def __enter__(self) -> Children:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, _interrupt)
        return self

    def __exit__(self, kind, value, traceback) -> None:
        try:
            if kind is not None:
                self.stop()
        finally:
            if self._previous is not None:
                signal.signal(signal.SIGTERM, self._previous)
                self._previous = None


def _send(process: subprocess.Popen, line: str) -> None:
    """``line`` to the child's stdin, or its stdin closed for ``""`` (a child that has already
    ended is left to ``run``'s wait, which reports it)."""
    if process.stdin.closed:
        return
    try:
        if line:
            process.stdin.write(line.rstrip("\n") + "\n")
            process.stdin.flush()
        else:
            process.stdin.close()
    except BrokenPipeError:
        pass


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def die_with_parent() -> None:
    """In a child: ``SIGTERM`` when the parent (``BAYESRANK_PARENT_PID``) dies (Linux's
    ``PR_SET_PDEATHSIG``), and exit now if it has died already."""
    parent = os.environ.get("BAYESRANK_PARENT_PID")
    if parent is None:
        return
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):  # no prctl: the parent's own stop() remains
            pass
    if os.getppid() != int(parent):
        sys.exit("bayesrank.experiments.relational.runner: the parent process is gone")
