"""The package's shape: the one layer table of the project, and the rules on imports it implies.

``TABLE`` below is the source of the layers: the README points here, and DESIGN.md's "Layout"
follows it. Each top-level module or package of ``bayesrank`` has a layer and a line saying what
lives there; a package's line names each of its public modules and subpackages (``name.py``,
``name/``), so a new module is placed in the table the day it is written.

The rules, checked on the source parsed with ``ast`` (no import of the package), lazy imports
inside functions included:

* **Down the layers.** A module imports only from its own layer or below.
* **Not the top level.** No module inside the package imports the top-level package itself
  (``import bayesrank``, ``from bayesrank import X``, ``from .. import __version__``): it
  re-exports every layer, so it sits above all of them. Importing a submodule by its full path
  (``from bayesrank.data import pairs``) is the normal downward import. The version is read from
  ``bayesrank._version``.
* **No other package's private names.** A top-level module or package (``data``, ``metrics``,
  ``ordering``, ...) does not import a name starting with ``_`` from another one, whether the name
  is a module (``data._io``) or what it holds (``from ..data.checks import _show``). Inside one
  top-level package private names are shared freely (``metrics/pairwise.py`` may use
  ``metrics/_common.py``). What two packages share is made public in the lower one. The root's
  own private modules, ``bayesrank._moved`` (old import paths) and ``bayesrank._version``, belong
  to the whole package and are exempt.
* **Short modules.** No module runs past ~400 lines unless its docstring says why.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "bayesrank"

#: The layers, bottom to top: ``{top-level module or package: (layer, what lives there)}``.
#: ``parallel`` sits below ``learning``: a shared ``theta``'s objective is a sum over queries
#: inside compiled steps, so learning maps its single-query objectives with parallel's query map;
#: parallel needs nothing from learning.
TABLE = {
    # 0: NumPy and single-query JAX; no kernels, no inference.
    "_version": (0, "the package's version (``__version__``)"),
    "_moved": (0, "old import paths of moved public names, with a DeprecationWarning"),
    "data": (
        0,
        "data in, checked: letor.py (LETOR / SVMlight reader; _letor_automaton.py its tokens), "
        "scores.py (prediction files), checks/ (the one set of host-side validators; "
        "checks/formatting.py their message helpers, shared with other packages' checks), "
        "pairs.py (pairs from grades, within queries, sampling, splitting), problem.py (one "
        "query's problem), batch.py (the one home of padding and size buckets), graphs/ "
        "(relation graphs; OHSUMED and HetRec readers), summary.py, study.py (a relational "
        "collection on disk and its split), userdata.py (ratings and comparisons, "
        "queries_to_arrays), movielens.py (HetRec MovieLens), functions.py (synthetic test "
        "functions of preferential optimisation), keys.py (user PRNG keys checked), files.py "
        "(plain or gzipped files, first_non_finite), sample.py and sample/ (the bundled OHSUMED "
        "queries, with provenance)",
    ),
    "compiler": (0, "jit: jax.jit with the XLA options every program of the package compiles with"),
    "diagnostics": (0, "the warning of an iterative result stopped unconverged at its cap"),
    "executables": (0, "compiled programs kept on disk whole: a second process does not trace"),
    "metrics": (
        0,
        "metrics of one query in pure JAX: ranking.py (NDCG@k, P@k, AP), pairwise.py (error, "
        "AUC), correlation.py (Kendall, Spearman), calibration.py (Brier, log loss, ECE); "
        "checks.py (host-side checks of their inputs, which ordering and order_learning use)",
    ),
    "ordering": (0, "Cohen, Schapire & Singer's greedy total order from pair scores"),
    "order_learning": (0, "Cohen, Schapire & Singer's Hedge weights over preference functions"),
    "runtime": (0, "BLAS threads, the persistent compilation cache, clearing compiled programs"),
    "threads": (0, "deprecated module: one_blas_thread lives in runtime"),
    # 1
    "kernels": (
        1,
        "covariances: base.py (the kernel interface), attributes.py (RBF Eq. 1, ARD, linear, "
        "per-entity), graph.py (regularized Laplacian Eq. 2, diffusion, hidden common cause), "
        "spectra.py (graph spectra kept per process, by content), "
        "lowrank.py (pivoted-Cholesky attribute factors), xpgp.py (the XPGP prior, Eq. 5), "
        "params.py (constraints, trainable flags)",
    ),
    # 2
    "linalg": (2, "PSD roots (Cholesky, eigh fallback), blocked triangular products"),
    "lanczos": (2, "log-determinants by stochastic Lanczos quadrature"),
    "querymap": (2, "the query map: lax.map on a CPU, vmap on accelerators"),
    "likelihoods": (2, "the probit pair, tie and ordinal likelihoods and their tilted moments"),
    "predict": (2, "Eq. 13-14 from (mean, cov) or from draws"),
    # 3
    "inference": (
        3,
        "the engines: engine.py (the Engine / GaussianEngine protocol), engines.py (EP, "
        "Laplace, SparseLaplace, NUTS by name, one resolver), gaussian/ (the site algebra EP, "
        "Laplace and the designs' belief share), ep/ (EP with 2-D sites), laplace.py (the "
        "Laplace approximation), sparse/ (XPGP without a dense n x n matrix: sparse precisions, "
        "low-rank attributes, Laplace in precision form), nuts/ (NUTS in NumPyro), posterior.py "
        "(one prediction face for every engine), problem.py (one problem's posterior in one "
        "compiled call)",
    ),
    "baselines": (
        3,
        "the classic rankers, jitted and differentiable: ranksvm.py and svm_estimator.py "
        "(RankSVM, solved by newton.py), rankboost.py (RankBoost), sortnet.py and cmpnn.py "
        "(SortNet and its comparator network), prank.py (PRank); params.py (the scikit-learn "
        "parameter face every estimator of the package shares)",
    ),
    # 4
    "parallel": (
        4,
        "the one batching path: batching.py (problems stacked at bucketed shapes), plan.py and "
        "program.py (a collection's size groups in one compiled program), sharding.py and "
        "distributed.py (devices and processes), collection.py (fit_predict, fit_ep, ...), "
        "baselines.py (baselines and metrics per query); mapping.py (deprecated: querymap)",
    ),
    # 5
    "learning": (
        5,
        "hyperparameter learning: fit.py (fit_hyperparameters) with options.py and settings.py, "
        "config.py (what is learned), objectives.py and evidence.py (the objectives and their "
        "compiled programs), hyperpriors.py, em.py and sparse_em.py (EM-EP; EM in precision "
        "form), sparse_evidence.py (an XPGP prior learned by the sparse engine's evidence), "
        "squarem.py (SQUAREM), guard.py (optax's guard), bfgs.py (the host-driven BFGS), "
        "design.py and initialize.py (where a fit starts), matching.py (likelihood parameters "
        "matched to the data), layout.py, stages.py and drive.py (how a fit runs), results.py and "
        "diagnostics.py (what it returns and warns)",
    ),
    # 6: user-facing pieces built on everything below.
    "model": (6, "XPGPModel: a prior and an engine, and its fit"),
    "posterior": (6, "Posterior, what a fit returns, and its prediction"),
    "evaluation": (6, "LETOR-style evaluation of many queries (MAP, NDCG@k, P@k)"),
    "active": (
        6,
        "active exploration: criteria.py (scores of candidate pairs), loop.py (the compiled "
        "loop), collection.py (one query or a collection on host arrays), session.py and "
        "interactive.py (a person answering); designs/ (preferential optimisation over new "
        "designs)",
    ),
    "label_ranking": (
        6,
        "label ranking: rpc.py (pairwise comparison) with logistic.py, constraint.py "
        "(constraint classification), gp.py (the GP label ranker), metrics.py (Kendall between "
        "label rankings), data.py (semi-synthetic benchmarks)",
    ),
    "plot": (
        6,
        "figures (matplotlib): calibration.py, curves.py, pairs.py, relational.py; base.py "
        "(lazy matplotlib, axes, bands, saving; the studies draw with it)",
    ),
    "io": (
        6,
        "saving and loading fitted models without pickle: model_file.py, archive.py, trees.py",
    ),
    "experiments": (
        6,
        "the studies as package code: relational/, active/, baselines/, ep_vs_nuts/, "
        "inference/, labels/, label_ranking.py, large.py, large_entities.py (its entity split); "
        "protocol.py, their presets' shape",
    ),
    "study": (6, "deprecated package: the relational study lives in experiments"),
    # 7
    "cli": (
        7,
        "the bayesrank command: experiment.py, model.py (fit, predict), pairfile.py "
        "(predict's pair file), data.py (summary, evaluate), active.py, optimize.py",
    ),
    "__main__": (7, "python -m bayesrank"),
}

LAYERS = {name: layer for name, (layer, _) in TABLE.items()}

#: The root's private modules: they belong to the whole package, so any module may import them.
ROOT_PRIVATE = {"_moved", "_version"}

#: A module longer than this says why in its docstring (a line starting "Length:").
MAX_LINES = 400


def modules():
    return sorted(p for p in PACKAGE.rglob("*.py"))


def top_level(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def imports(tree: ast.AST, package: tuple[str, ...]):
    """``(line, target, names)`` of every import of ``bayesrank`` in ``tree``, relative or
    absolute: ``target`` is the imported module's dotted path as a tuple (``("bayesrank",
    "data", "pairs")``) and ``names`` what a ``from`` import takes from it (empty for
    ``import``). ``package``: the dotted path of the package the module is in."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = (*base, *(node.module.split(".") if node.module else []))
            elif node.module and node.module.split(".")[0] == "bayesrank":
                target = tuple(node.module.split("."))
            else:
                continue
            yield node.lineno, target, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "bayesrank":
                    yield node.lineno, tuple(alias.name.split(".")), []


def _package_of(path: Path) -> tuple[str, ...]:
    if path.name == "__init__.py":
        return path.relative_to(PACKAGE.parent).parts[:-1]
    return path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1]


def _is_submodule(parts) -> bool:
    """Whether ``bayesrank/<parts>`` is a module or a package of the source tree."""
    where = PACKAGE.joinpath(*parts)
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def imported_modules(path: Path):
    """``(line, top-level bayesrank module)`` of every import in ``path`` (relative or absolute)."""
    for line, target, names in imports(ast.parse(path.read_text()), _package_of(path)):
        if len(target) > 1:
            yield line, target[1]
        else:  # from bayesrank import data, metrics: submodules are imported one by one
            for name in names:
                if _is_submodule([name]):
                    yield line, name


def top_level_imports(tree: ast.AST, package: tuple[str, ...]) -> list[str]:
    """The imports in ``tree`` that take the top-level package itself: ``import bayesrank``,
    ``from bayesrank import X`` or ``from .. import X`` for an ``X`` that is not a submodule."""
    found = []
    for line, target, names in imports(tree, package):
        if len(target) != 1:
            continue
        taken = [n for n in names if not _is_submodule([n])] if names else ["bayesrank"]
        found += [f"line {line}: takes {name!r} from the top-level package" for name in taken]
    return found


def private_imports(tree: ast.AST, package: tuple[str, ...], own: str) -> list[str]:
    """The imports in ``tree`` of a private name (a module or what it holds) of another
    top-level module or package of bayesrank than ``own``, the module's own (``"data"`` for
    ``bayesrank/data/pairs.py``, ``"ordering"`` for ``bayesrank/ordering.py``)."""
    found = []
    for line, target, names in imports(tree, package):
        if len(target) == 1:  # from bayesrank import _moved
            parts = [(n,) for n in names]
        else:
            parts = [(*target[1:], n) for n in names] if names else [target[1:]]
        for path in parts:
            if path[0] == own or path[0] in ROOT_PRIVATE:
                continue
            if any(_private(p) for p in path):
                found.append(f"line {line}: imports bayesrank.{'.'.join(path)}")
    return found


def test_every_module_has_a_layer():
    missing = {top_level(p) for p in modules() if p.name != "__init__.py" or p.parent != PACKAGE}
    missing -= set(LAYERS)
    assert not missing, f"modules without a layer in TABLE: {sorted(missing)}"
    gone = set(LAYERS) - {top_level(p) for p in modules()}
    assert not gone, f"TABLE names modules that no longer exist: {sorted(gone)}"


def test_the_table_names_every_module_of_a_package():
    """A package's line names each public module (``name.py``) and subpackage (``name/``)."""
    missing = []
    for name, (_, what) in TABLE.items():
        folder = PACKAGE / name
        if not folder.is_dir():
            continue
        for child in sorted(folder.iterdir()):
            if _private(child.name) or child.name.startswith("__"):
                continue
            if child.suffix == ".py" or (child / "__init__.py").is_file():
                label = child.name if child.suffix == ".py" else child.name + "/"
                if label not in what:
                    missing.append(f"{name}/{label}")
    assert not missing, f"TABLE's lines do not name: {missing}"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    if path == PACKAGE / "__init__.py":
        return  # the public API re-exports from every layer
    own = LAYERS[top_level(path)]
    upward = [
        f"line {line}: imports bayesrank.{target} (layer {LAYERS[target]}) from layer {own}"
        for line, target in imported_modules(path)
        if target in LAYERS and LAYERS[target] > own
    ]
    assert not upward, f"{path.relative_to(PACKAGE)}: " + "; ".join(upward)


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_the_top_level_package(path):
    if path == PACKAGE / "__init__.py":
        return
    found = top_level_imports(ast.parse(path.read_text()), _package_of(path))
    assert not found, f"{path.relative_to(PACKAGE)}: " + "; ".join(found)


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_another_packages_private_names(path):
    if path == PACKAGE / "__init__.py":
        return  # the package root: everything below is its own
    found = private_imports(ast.parse(path.read_text()), _package_of(path), top_level(path))
    assert not found, f"{path.relative_to(PACKAGE)}: " + "; ".join(found)


@pytest.mark.parametrize(
    "package, source, caught",
    [
        (("bayesrank", "io"), "import bayesrank", True),
        (("bayesrank", "io"), "def f():\n    import bayesrank as b", True),
        (("bayesrank", "cli"), "from .. import __version__", True),
        (("bayesrank", "cli"), "from bayesrank import XPGPModel", True),
        (("bayesrank",), "from . import __version__", True),
        (("bayesrank", "cli"), "from .. import data", False),  # a submodule
        (("bayesrank", "cli"), "from .._version import __version__", False),
        (("bayesrank", "cli"), "import bayesrank.data.pairs", False),
    ],
)
def test_the_top_level_check_catches_every_form(package, source, caught):
    assert bool(top_level_imports(ast.parse(source), package)) == caught, source


@pytest.mark.parametrize(
    "package, own, source, caught",
    [
        (("bayesrank", "cli"), "cli", "from ..data._io import first_non_finite", True),
        (("bayesrank", "cli"), "cli", "from ..data.checks import _show", True),
        (("bayesrank", "cli"), "cli", "from ..metrics import _checks", True),
        (("bayesrank", "cli"), "cli", "from bayesrank.plot._base import pyplot", True),
        (("bayesrank", "cli"), "cli", "import bayesrank.baselines._data", True),
        (("bayesrank",), "ordering", "from .metrics._checks import mask_values", True),
        (("bayesrank", "metrics"), "metrics", "from . import _checks", False),  # its own
        (("bayesrank", "metrics"), "metrics", "from ._common import _valid", False),
        (("bayesrank", "metrics", "x"), "metrics", "from .._common import _valid", False),
        (("bayesrank", "data"), "data", "from .._moved import moved", False),  # the root's
        (("bayesrank", "cli"), "cli", "from .._version import __version__", False),
        (("bayesrank", "cli"), "cli", "from ..data.files import first_non_finite", False),
    ],
)
def test_the_private_name_check_catches_every_form(package, own, source, caught):
    assert bool(private_imports(ast.parse(source), package, own)) == caught, source


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_long_modules_say_why(path):
    """Over 400 lines a module says why in its docstring; none reaches 500 (a module that
    grows past it has two jobs, and splits)."""
    lines = len(path.read_text().splitlines())
    assert lines < 500, f"{path.relative_to(PACKAGE)} has {lines} lines: split it along its jobs"
    if lines <= MAX_LINES:
        return
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    assert "Length:" in doc, f"{path.relative_to(PACKAGE)} has {lines} lines and no 'Length:' note"
