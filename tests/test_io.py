"""bayesrank.io: a fitted posterior saved to a model file and loaded back, without pickle.

Reference: the posterior itself. After ``load``, every prediction (``predict_pairs``,
``probability_matrix``, ``scores``, ``rank``, ``mean``, ``cov``, ``log_evidence``,
``predict_new``) and every saved leaf (prior, problem, engine result, learning result) must equal
the original's exactly: the arrays are stored bit for bit, and nothing is refitted.

Problems are tiny (8 entities, 8 pairs: a size bucket, so the Laplace fit's sites are not
padded; ``XPGPModel`` keeps padded Laplace sites, and ``predict_new`` then fails on the original
posterior, a model.py matter). NUTS: the sampler is not run (compiling it takes several seconds);
its :class:`NUTSPosterior` is built from draws of the EP posterior, which the file format treats
exactly as a sampler's.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayesrank import (
    ARD,
    RBF,
    XPGP,
    Independent,
    PreferenceProblem,
    RegularizedLaplacian,
    XPGPModel,
)
from bayesrank.inference.nuts import NUTSDiagnostics, NUTSPosterior
from bayesrank.io import FORMAT, FORMAT_VERSION, ModelFileError, load, load_metadata, save
from bayesrank.kernels import Kernel
from bayesrank.kernels.params import Positive, param, pytree_dataclass
from bayesrank.model import Posterior

N = 8
X = np.random.default_rng(0).normal(size=(N, 2))
PAIRS = np.array([[0, 1], [2, 3], [4, 5], [1, 6], [7, 2], [3, 0], [5, 7], [6, 4]])
W = np.zeros((N, N))
W[[0, 1, 2, 5], [1, 0, 5, 2]] = [1.0, 1.0, 2.0, 2.0]
W[3, 4] = W[4, 3] = 0.5
#: Every ordered pair of distinct entities.
ALL_PAIRS = np.array([(i, j) for i in range(N) for j in range(N) if i != j])


@pytest.fixture(scope="module")
def problem():
    return PreferenceProblem.create(PAIRS, X=X)


@pytest.fixture(scope="module")
def ep_attributes(problem):
    return XPGPModel(XPGP(RBF(rho=0.8))).fit(problem)


@pytest.fixture(scope="module")
def ep_entity(problem):
    return XPGPModel(XPGP(RBF(), entity=Independent(scale=0.5))).fit(problem)


@pytest.fixture(scope="module")
def ep_relation():
    prior = XPGP(
        ARD(lengthscales=jnp.array([1.0, 2.0])),
        (RegularizedLaplacian(iota=2.0),),
        jnp.array([1.0, 0.7]),
    )
    return XPGPModel(prior).fit(PreferenceProblem.create(PAIRS, X=X, relations=[W]))


@pytest.fixture(scope="module")
def ep_learned(problem):
    return XPGPModel(XPGP(RBF())).fit(problem, learn_hyperparameters=True)


@pytest.fixture(scope="module")
def laplace_fit(problem):
    return XPGPModel(XPGP(RBF(), entity=Independent()), inference="laplace").fit(problem)


@pytest.fixture(scope="module")
def nuts_draws(ep_attributes):
    """A NUTS posterior of draws from the EP posterior (two chains of 25), with one sampled
    hyperparameter, as :func:`bayesrank.inference.nuts.sample_hyperparameters` would give."""
    rng = np.random.default_rng(1)
    mean, cov = np.asarray(ep_attributes.mean), np.asarray(ep_attributes.cov)
    samples = rng.multivariate_normal(mean, cov, size=(2, 25))
    flat = samples.reshape(-1, N)
    diagnostics = NUTSDiagnostics(
        r_hat=np.full(N, 1.001),
        ess=np.full(N, 40.0),
        divergences=np.zeros(2, np.int64),
        accept_prob=np.array([0.8, 0.85]),
        num_steps=np.array([3.0, 3.5]),
        step_size=np.array([0.5, 0.6]),
        hyper_r_hat={"rho": np.float64(1.002)},
        hyper_ess={"rho": np.float64(np.nan)},
    )
    result = NUTSPosterior(
        samples=jax.device_put(samples),
        mean=jax.device_put(flat.mean(axis=0)),
        cov=jax.device_put(np.cov(flat.T, bias=True)),
        hyper={"rho": jax.device_put(rng.uniform(0.5, 1.5, size=(2, 25)))},
        diagnostics=diagnostics,
    )
    return Posterior(ep_attributes.prior, ep_attributes.problem, result, None, "nuts")


def round_trip(posterior: Posterior, tmp_path, **options) -> Posterior:
    path = tmp_path / "model.npz"
    save(posterior, path, **options)
    return load(path)


def assert_tree_equal(a, b):
    """Same structure (classes, static fields, dict keys), same leaf types, dtypes and bits."""
    leaves_a, tree_a = jax.tree_util.tree_flatten(a)
    leaves_b, tree_b = jax.tree_util.tree_flatten(b)
    assert tree_a == tree_b
    for x, y in zip(leaves_a, leaves_b, strict=True):
        assert type(x) is type(y)
        assert np.asarray(x).dtype == np.asarray(y).dtype
        assert getattr(x, "weak_type", None) == getattr(y, "weak_type", None)
        np.testing.assert_array_equal(x, y)  # exact; NaN equals NaN


def assert_same(a: Posterior, b: Posterior):
    """``b`` (loaded) is ``a`` (fitted) and predicts exactly as it does."""
    assert type(b) is Posterior and b.inference == a.inference
    assert_tree_equal(a.prior, b.prior)
    assert b.problem.n == a.problem.n
    problem_a = (a.problem.pairs, a.problem.X, a.problem.relations)
    assert_tree_equal(problem_a, (b.problem.pairs, b.problem.X, b.problem.relations))
    assert_tree_equal(a.result, b.result)
    assert_tree_equal(a.learning, b.learning)
    assert_tree_equal(a.predict_pairs(ALL_PAIRS), b.predict_pairs(ALL_PAIRS))
    assert_tree_equal(a.probability_matrix(), b.probability_matrix())
    assert_tree_equal(a.scores(), b.scores())
    np.testing.assert_array_equal(a.rank(), b.rank())
    assert_tree_equal((a.mean, a.cov), (b.mean, b.cov))
    assert b.converged == a.converged
    if a.inference != "nuts":
        assert_tree_equal(a.log_evidence, b.log_evidence)
        if not a.prior.relations:
            X_new = X[:3] + 0.25
            assert_tree_equal(a.predict_new(X_new), b.predict_new(X_new))


@pytest.mark.slow  # 3 s or more in the fast loop
@pytest.mark.parametrize("fit", ["ep_attributes", "ep_entity", "ep_relation"])
def test_ep_round_trip(fit, request, tmp_path):
    posterior = request.getfixturevalue(fit)
    loaded = round_trip(posterior, tmp_path)
    assert_same(posterior, loaded)
    if posterior.prior.relations:  # graphs are prepared again from the saved adjacency
        assert_tree_equal(posterior.components(), loaded.components())


@pytest.mark.slow  # 3 s or more in the fast loop
def test_learned_prior_round_trips(ep_learned, tmp_path):
    assert ep_learned.learning is not None
    loaded = round_trip(ep_learned, tmp_path)
    assert_same(ep_learned, loaded)
    meta = load_metadata(tmp_path / "model.npz")
    summary = meta["learning_summary"]
    assert summary["converged"] == bool(np.all(ep_learned.learning.converged))
    assert summary["log_evidence"] == float(np.sum(ep_learned.learning.posteriors.log_evidence))
    assert summary["n_iter"] == len(ep_learned.learning.trace.objective)
    rho = meta["prior"]["fields"]["attribute"]["fields"]["rho"]
    assert rho["value"] == float(ep_learned.prior.attribute.rho)  # repr: exact in JSON too
    assert rho["default_trainable"] is True and rho["constraint"] == {"Positive": {"lower": 0.0}}


@pytest.mark.slow  # 3 s or more in the fast loop
def test_laplace_round_trip(laplace_fit, tmp_path):
    assert_same(laplace_fit, round_trip(laplace_fit, tmp_path))


def test_nuts_round_trip(nuts_draws, tmp_path):
    loaded = round_trip(nuts_draws, tmp_path)
    assert_same(nuts_draws, loaded)
    assert type(loaded.result.diagnostics.hyper_r_hat["rho"]) is np.float64
    assert isinstance(loaded.result.diagnostics.r_hat, np.ndarray)  # host arrays stay host


def test_file_is_documented_npz_without_pickle(ep_relation, tmp_path):
    path = tmp_path / "model.npz"
    save(ep_relation, path)
    meta = load_metadata(path)
    # version 1: no ties, weights or tie margin (a version-1 reader reads it)
    assert meta["format"] == FORMAT and meta["format_version"] == 1 and FORMAT_VERSION == 2
    assert meta["engine"] == "ep" and meta["bayesrank_version"]
    assert meta["summary"]["n_entities"] == N and meta["summary"]["n_relations"] == 1
    assert meta["summary"]["log_evidence"] == float(ep_relation.log_evidence)
    assert meta["problem"]["relations"] == ["problem/relations/0"]
    fields = meta["prior"]["fields"]
    assert [r["dataclass"] for r in fields["relations"]["tuple"]] == ["RegularizedLaplacian"]
    assert fields["relations"]["tuple"][0]["fields"]["normalized"] == {"static": False}
    assert fields["weights"]["value"] == np.asarray(ep_relation.prior.weights).tolist()
    with zipfile.ZipFile(path) as archive:
        assert all(name.endswith(".npy") for name in archive.namelist())
    with np.load(path, allow_pickle=False) as archive:  # nothing needs pickle
        arrays = {k: archive[k] for k in archive.files}
    json.loads(arrays.pop("meta.json").tobytes(), parse_constant=pytest.fail)  # strict JSON
    assert {k: [list(a.shape), a.dtype.name] for k, a in arrays.items()} == {
        k: [v["shape"], v["dtype"]] for k, v in meta["arrays"].items()
    }
    assert arrays["result/cov"].shape == (N, N) and arrays["problem/relations/0"].shape == (N, N)


def test_file_objects_names_and_compression(ep_entity, tmp_path):
    buffer = io.BytesIO()
    save(ep_entity, buffer)
    buffer.seek(0)
    assert_same(ep_entity, load(buffer))
    path = tmp_path / "query.model"  # no suffix added
    save(ep_entity, path, compress=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["query.model"]  # no temporary left
    assert_same(ep_entity, load(str(path)))


def rewrite(src, dst, *, drop=(), replace=None, edit=None):
    """A copy of the model file ``src`` at ``dst`` with arrays dropped or replaced and the JSON
    document edited in place by ``edit(doc)``."""
    with np.load(src, allow_pickle=False) as archive:
        entries = {k: archive[k] for k in archive.files}
    doc = json.loads(entries["meta.json"].tobytes())
    for key in drop:
        del entries[key]
    entries.update(replace or {})
    if edit is not None:
        edit(doc)
    entries["meta.json"] = np.frombuffer(json.dumps(doc).encode(), np.uint8)
    with open(dst, "wb") as f:
        np.savez(f, **entries)
    return dst


@pytest.fixture
def saved(ep_attributes, tmp_path):
    path = tmp_path / "good.npz"
    save(ep_attributes, path)
    return path


def expect_error(path, key: str, match: str):
    with pytest.raises(ModelFileError, match=match) as info:
        load(path)
    assert info.value.key == key and info.value.file == str(path)
    assert str(info.value).startswith(f"{path}: {key}: ")


def test_load_rejects_files_that_are_not_models(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a model")
    expect_error(text, "file", "not a bayesrank model file")
    other = tmp_path / "other.npz"
    np.savez(other, weights=np.ones(3))
    expect_error(other, "meta.json", "no meta.json")
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, **{"meta.json": np.frombuffer(b'{"format": "other"}', np.uint8)})
    expect_error(foreign, "format", "not a bayesrank model file")


def test_load_rejects_a_newer_format_version(saved, tmp_path):
    newer = rewrite(saved, tmp_path / "newer.npz", edit=lambda d: d.update(format_version=3))
    expect_error(newer, "format_version", "3 is newer than this bayesrank reads")


def test_load_rejects_a_missing_array(saved, tmp_path):
    expect_error(rewrite(saved, tmp_path / "m.npz", drop=["result/cov"]), "result/cov", "missing")
    expect_error(
        rewrite(saved, tmp_path / "p.npz", drop=["prior/attribute/rho"]),
        "prior/attribute/rho",
        "missing",
    )


def test_load_rejects_an_array_of_the_wrong_shape(saved, ep_attributes, tmp_path):
    longer = {"result/mean": np.zeros(N + 1, np.asarray(ep_attributes.mean).dtype)}
    expect_error(
        rewrite(saved, tmp_path / "a.npz", replace=longer), "result/mean", r"the file lists \(8,\)"
    )

    def listed(doc):  # the listing agrees: the problem does not
        doc["arrays"]["result/mean"]["shape"] = [N + 1]

    both = rewrite(saved, tmp_path / "b.npz", replace=longer, edit=listed)
    expect_error(both, "result/mean", r"the problem needs \(8,\)")
    ints = {"result/cov": np.zeros((N, N), np.int64)}
    expect_error(rewrite(saved, tmp_path / "c.npz", replace=ints), "result/cov", "dtype int64")


@pytree_dataclass
class Cosine(Kernel):
    """A kernel the library does not know: ``scale^2 cos(sum(x - y))``."""

    scale: jnp.ndarray = param(Positive(), default=1.0)

    def evaluate(self, x, y):
        return self.scale**2 * jnp.cos(jnp.sum(x - y))


def test_unknown_kernel_class_and_custom_kernels(ep_attributes, tmp_path):
    custom = dataclasses.replace(ep_attributes, prior=XPGP(Cosine(scale=0.5)))
    path = tmp_path / "custom.npz"
    save(custom, path)
    expect_error(path, "prior/attribute/dataclass", "unknown kernel class 'Cosine'")
    assert_tree_equal(load(path, kernels=[Cosine]).prior, custom.prior)
    renamed = rewrite(
        path,
        tmp_path / "renamed.npz",
        edit=lambda d: d["prior"]["fields"]["attribute"].update(dataclass="Matern"),
    )
    expect_error(renamed, "prior/attribute/dataclass", "unknown kernel class 'Matern'")


class Opaque(Kernel):
    """A kernel that is no dataclass pytree: nothing to save it by."""

    def evaluate(self, x, y):
        return jnp.sum(x * y)


def test_save_names_a_path_that_is_a_directory_or_no_file(ep_attributes, tmp_path):
    """Issue 49: a directory raised IsADirectoryError naming an internal temporary file. Path
    classes: an existing directory (str, Path, "."), something that is neither a name nor a
    writable object (an int, None), a missing parent directory (FileNotFoundError, per the
    contract), a new file name (saved and read back)."""
    for folder in (tmp_path, str(tmp_path), "."):
        where = re.escape(f"cannot save to '{folder!s}': it is a directory")
        with pytest.raises(ValueError, match=where):
            save(ep_attributes, folder)
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind
    for wrong in (3, None, ["model.npz"]):
        with pytest.raises(ValueError, match=r"path must be a file name or a binary file object"):
            save(ep_attributes, wrong)
    with pytest.raises(FileNotFoundError, match="no directory"):
        save(ep_attributes, tmp_path / "missing" / "model.npz")
    save(ep_attributes, tmp_path / "model.npz")
    np.testing.assert_array_equal(load(tmp_path / "model.npz").mean, ep_attributes.mean)


def test_a_model_file_whose_meta_is_nested_too_deep_is_named(tmp_path):
    """json.loads' RecursionError on 100,000 nested brackets is a ModelFileError (ValueError)."""
    path = tmp_path / "deep.npz"
    text = "[" * 100_000 + "]" * 100_000
    np.savez(path, **{"meta.json": np.frombuffer(text.encode(), np.uint8)})
    with pytest.raises(ModelFileError, match=r"meta\.json.*not valid JSON"):
        load(path)


def test_save_rejects_what_is_not_a_posterior(ep_attributes, tmp_path):
    path = tmp_path / "model.npz"
    for wrong in (ep_attributes.result, {"mean": ep_attributes.mean}, None):
        with pytest.raises(ValueError, match=r"save expects a bayesrank\.model\.Posterior"):
            save(wrong, path)
    opaque = dataclasses.replace(ep_attributes, prior=XPGP(Opaque()))
    with pytest.raises(ValueError, match="prior/attribute: cannot be saved: Opaque"):
        save(opaque, path)
    batched = dataclasses.replace(
        ep_attributes, result=ep_attributes.result._replace(mean=ep_attributes.mean[None])
    )
    with pytest.raises(ValueError, match="single problem"):
        save(batched, path)
    assert not path.exists()
