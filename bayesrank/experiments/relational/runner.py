"""Run the relational study: every model group, at every number of known pairs, as its own
task, in ``jobs`` child processes or in this process (``jobs=0``), then the summary, the
comparisons, the tables and the figure.

Protocol (Kersting & Xu 2009, Sec. 6): for each number of known pairs ``k`` and each of
``repeats`` repetitions ``r``, ``k`` of each query's pairs known (uniformly at random, key
``fold_in(fold_in(PRNGKey(seed), r), q)``) and every other pair of the query a test pair. Every
model is fitted on the known pairs and predicts every test pair (transductively: all of a
query's entities are in its prior). The GPs' ``theta`` is shared by the queries of a
repetition; each repetition is fitted afresh.

Why child processes: compiled CPU programs hold memory mappings that jaxlib does not release,
and one process running every model of a full study hit the kernel's limit of 65,530 mappings
("LLVM ERROR: Unable to allocate section memory"). The persistent compilation cache
(``bayesrank.runtime.enable_compilation_cache``) lets the children share compiled programs.
A task holds one model group at every number of known pairs, in that order: its settings share
most programs (``data.batch.size_buckets``), which a child then compiles or loads once.

Each of the ``jobs`` children runs tasks until none is left: it reads a task from its stdin
(``{"models": [...], "part": PATH}``, one JSON line), writes the task's rows to ``PATH``, drops
its compiled programs (``runtime.clear_compiled``: its memory mappings stay those of one task,
as in a process of its own) and says ``done``; the parent then sends the next task not yet
taken, or closes its stdin. A process start and JAX's import (about 3 s of a core each) are
paid once per child instead of once per task (the sample's study: 2 children for 7 tasks).

    python -m bayesrank.experiments.relational.runner --known ... (a child; tasks on stdin)
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
import time
from pathlib import Path

import jax
import numpy as np

from ...data.batch import bucket_size
from ...data.study import split_entities, split_known
from .children import Children, die_with_parent
from .collections import load_collection
from .config import StudyConfig, held_out_value
from .measures import COMPARATORS, compare, gp_numbers, summarize, svm_numbers
from .models import SVMS, entity_split_models, fit_gp, fit_svms, model_names
from .report import markdown, plot, table

__all__ = ["FULL_STUDY", "run_all", "run_setting", "run_study"]

#: The collections of ``--collection all`` (the full study on the benchmark data).
FULL_STUDY = ("OHSUMED", "MovieLens", "MQ2008")


def splits_of(queries, k: int, config: StudyConfig, rep: int) -> list[tuple]:
    """Each query's ``(known, test)`` pairs at setting ``k`` (known pairs, or with
    ``split="entities"`` the judgements a held-out entity keeps) of repetition ``rep``."""
    key = jax.random.fold_in(jax.random.PRNGKey(config.seed), rep)
    if config.split == "pairs":
        return [split_known(jax.random.fold_in(key, b), q.pairs, k) for b, q in enumerate(queries)]
    out = []
    for b, q in enumerate(queries):
        try:
            split = split_entities(
                jax.random.fold_in(key, b),
                q.pairs,
                q.n,
                held_out=config.held_out,
                keep=config.keep,
                n_known=config.known[0],
            )
        except ValueError as error:
            raise ValueError(f"query {q.qid}: {error}") from None
        out.append((split.known[k], split.test))
    return out


def run_setting(queries, k: int, config: StudyConfig, relations, models, progress=None):
    """Every repetition of setting ``k`` (``splits_of``) for ``models``: ``({model: [row per
    query-repetition]}, {model: [hyperparameters per repetition]})``."""
    rows = {m: [] for m in models}
    hyper = {m: [] for m in models}
    for rep in range(config.repeats):
        splits = splits_of(queries, k, config, rep)
        size = bucket_size(max(len(test) for _, test in splits), 4)  # one program for all
        flips = [
            np.random.default_rng([config.seed, rep, b]).uniform(size=len(test)) < 0.5
            for b, (_, test) in enumerate(splits)
        ]
        for model in models:
            if model in SVMS:
                continue
            per_query = config.theta == "per-query"
            posts, prior = fit_gp(model, queries, splits, relations, rep, per_query)
            hyper[model].append(str(prior))
            for b, (q, (mean, cov)) in enumerate(zip(queries, posts, strict=True)):
                known, test = splits[b]
                row = gp_numbers(mean, cov, known, test, q.n, flips[b], size)
                rows[model].append({"qid": q.qid, "rep": rep, **row})
        if set(SVMS) & set(models):
            scores, chosen = fit_svms(queries, splits, relations, config.seed + rep)
            for model in (m for m in SVMS if m in models):
                hyper[model].append(chosen)
                for b, q in enumerate(queries):
                    known, test = splits[b]
                    row = svm_numbers(scores[model][b], known, test, q.n, size)
                    rows[model].append({"qid": q.qid, "rep": rep, **row})
        if progress is not None:
            progress(rep)
    return rows, hyper


def groups(models) -> list[list[str]]:
    """The models in separately run tasks: each GP alone, the two SVMs together."""
    svms = [m for m in models if m in SVMS]
    return [[m] for m in models if m not in svms] + ([svms] if svms else [])


def _worker(config: StudyConfig, tasks: queue.SimpleQueue, children, parts, progress) -> None:
    """A child process (started by ``children``, a ``children.Children``) that runs tasks from
    ``tasks`` (model groups) until none is left (module docstring): each task's ``(rows,
    hyper)`` by setting into ``parts[(k, group)]``; ``progress(group, k, rep)`` after each
    repetition (the child's stdout lines)."""
    command = [sys.executable, "-m", "bayesrank.experiments.relational.runner"]
    command += ["--known", *map(str, config.known), "--keep", *map(str, config.keep)]
    for name in ("collection", "queries", "repeats", "max_movies", "seed", "theta", "split"):
        command += [f"--{name.replace('_', '-')}", str(getattr(config, name) or 0)]  # 0: all
    command += ["--held-out", repr(config.held_out)]
    if config.data_dir is not None:
        command += ["--data-dir", str(config.data_dir)]
    with _scratch() as folder:
        current = {}

        def take() -> str:  # the next task's line, or "" (none left: the child ends)
            try:
                group = tasks.get_nowait()
            except queue.Empty:
                return ""
            current.update(group=group, path=folder / f"{'+'.join(group)}.json")
            return json.dumps({"models": list(group), "part": str(current["path"])})

        def line(text: str) -> str | None:
            if text.startswith("k="):  # "k=20 repetition 0"
                k, _, rep = text.split()
                progress(current["group"], int(k[2:]), rep)
            elif text == "done":
                for k, part in json.loads(current["path"].read_text()).items():
                    parts[(int(k), current["group"])] = (part["rows"], part["hyper"])
                return take()
            return None

        first = take()
        if not first:
            return
        code, _, err = children.run(command, line, first)
        if code:
            raise RuntimeError(f"{' '.join(command)} failed:\n{err[-3000:]}")


class _Bar:
    """A one-line progress bar on stderr: repetitions done (of every task), the last one's
    task, elapsed seconds. Called from the worker threads (a lock keeps the count)."""

    def __init__(self, total: int, start: float):
        self.total, self.done, self.start = total, 0, start
        self._lock = threading.Lock()

    def __call__(self, what: str) -> None:
        with self._lock:
            self.done += 1
            self._draw(what)

    def _draw(self, what: str) -> None:
        filled = round(30 * self.done / self.total)
        elapsed = time.perf_counter() - self.start
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} {what} "
            f"({elapsed:.0f} s)" + ("\n" if self.done == self.total else "")
        )
        sys.stderr.flush()


def run_study(config: StudyConfig, *, verbose: bool = True) -> dict:
    """Run the study of ``config``; write ``results.json``, ``table.txt``, ``table.md`` and
    (with matplotlib) ``curves.png`` to ``config.out`` (if set); return the results:
    ``{"collection", "queries", "relations", "settings": {str(k): {"summary",
    "comparisons", "rows", "hyperparameters"}}, "seconds", "config"}``."""
    start = time.perf_counter()
    queries = load_collection(config)
    relations = sorted(queries[0].relations)
    default = entity_split_models if config.split == "entities" else model_names
    models = list(config.models or default(relations))
    say = (lambda text: print(text, file=sys.stderr, flush=True)) if verbose else (lambda _: 0)
    say(
        f"{config.collection}: {len(queries)} queries ({[q.qid for q in queries]}), "
        f"n = {[q.n for q in queries]}, relations {relations}, known {list(config.known)}, "
        f"{config.repeats} repetitions, models {models}"
    )
    tasks = [tuple(g) for g in groups(models)]
    bar = _Bar(len(tasks) * len(config.settings) * config.repeats, start) if verbose else None
    parts = {}
    children = Children()

    def progress(group, k, rep):  # one repetition of a task done
        if bar is not None:
            letter = config.setting_letter
            bar(f"{letter}={k} {'+'.join(group)} repetition {int(rep) + 1}/{config.repeats}")

    with children:  # Ctrl-C or SIGTERM: every child stopped, within seconds
        if config.jobs == 0:
            for group in tasks:
                for k in config.settings:
                    parts[(k, group)] = run_setting(
                        queries, k, config, relations, list(group),
                        lambda rep, k=k, g=group: progress(g, k, rep),
                    )  # fmt: skip
        else:
            pending = queue.SimpleQueue()
            for group in tasks:
                pending.put(group)
            workers = min(config.jobs, len(tasks))

            def work(_):
                _worker(config, pending, children, parts, progress)

            children.each(work, range(workers), threads=workers)
    results = {
        "collection": config.collection,
        "queries": [{"qid": q.qid, "n": q.n, "pairs": len(q.pairs)} for q in queries],
        "relations": relations,
        "split": config.split,
        "settings": {},
        "config": {k: str(v) for k, v in vars(config).items()},
    }
    for k in config.settings:
        rows, hyper = {}, {}
        for group in groups(models):
            part_rows, part_hyper = parts[(k, tuple(group))]
            rows.update({m: part_rows[m] for m in group})
            hyper.update({m: part_hyper[m] for m in group})
        comparisons = {
            other: compare(rows, "XPGP", other)
            for other in COMPARATORS
            if rows.get(other) and rows.get("XPGP")
        }
        results["settings"][str(k)] = {
            "summary": summarize(rows),
            "comparisons": comparisons,
            "rows": rows,
            "hyperparameters": hyper,
        }
    results["seconds"] = time.perf_counter() - start
    if config.out is not None:  # the files, for the caller to name (not in results.json)
        results["files"] = [str(path) for path in write(results, config.out)]
    return results


def run_all(config: StudyConfig, *, verbose: bool = True) -> dict:
    """``run_study`` on each collection of ``FULL_STUDY`` in turn (each with its own
    default numbers of known pairs unless ``config.known`` is set), results in
    ``config.out / <collection>``: ``{collection: results}``."""
    import dataclasses

    out = {}
    for collection in FULL_STUDY:
        one = dataclasses.replace(
            config,
            collection=collection,
            out=None if config.out is None else Path(config.out) / collection.lower(),
        )
        out[collection] = run_study(one, verbose=verbose)
    return out


def write(results: dict, out: Path) -> list[Path]:
    """``results.json``, ``table.txt``, ``table.md``, ``curves.png`` and (where PGP+I ran with
    another model) ``paired.png`` to ``out``; returns the files written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    text = table(results) + f"run time {results['seconds']:.0f} s\n"
    written = [out / "results.json", out / "table.txt", out / "table.md"]
    written[0].write_text(json.dumps(results))
    written[1].write_text(text)
    written[2].write_text(markdown(results))
    return written + plot(results, out / "curves.png")


class _scratch:
    """A temporary folder (removed afterwards)."""

    def __enter__(self) -> Path:
        import tempfile

        self._dir = tempfile.TemporaryDirectory(prefix="bayesrank-study-")
        return Path(self._dir.name)

    def __exit__(self, *exc):
        self._dir.cleanup()


def main(argv=None) -> None:
    """A child process: tasks from stdin until it closes (module docstring), each task's rows by
    setting as JSON to its ``part``, then ``done`` on stdout."""
    die_with_parent()
    jax.config.update("jax_enable_x64", True)
    from ...runtime import clear_compiled, enable_compilation_cache

    enable_compilation_cache()
    p = argparse.ArgumentParser(prog="python -m bayesrank.experiments.relational.runner")
    p.add_argument("--collection", required=True)
    p.add_argument("--data-dir", type=Path, default=None)
    p.add_argument("--queries", type=int, required=True)
    p.add_argument("--known", type=int, nargs="+", required=True)
    p.add_argument("--repeats", type=int, required=True)
    p.add_argument("--max-movies", type=int, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--theta", default="shared")
    p.add_argument("--split", default="pairs")
    p.add_argument("--keep", type=int, nargs="+", required=True)
    p.add_argument("--held-out", type=held_out_value, required=True)
    args = p.parse_args(argv)
    config = StudyConfig.from_args(args, jobs=0)
    queries = load_collection(config)
    relations = sorted(queries[0].relations)
    for text in sys.stdin:
        task = json.loads(text)
        parts = {}
        for k in config.settings:
            rows, hyper = run_setting(
                queries,
                k,
                config,
                relations,
                task["models"],
                lambda rep, k=k: print(f"k={k} repetition {rep}", flush=True),  # the progress bar
            )
            parts[k] = {"rows": rows, "hyper": hyper}
        Path(task["part"]).write_text(json.dumps(parts))
        clear_compiled()  # the next task's memory mappings start from none (module docstring)
        print("done", flush=True)


if __name__ == "__main__":
    main()
