"""A collection in one call, sharded over devices and processes: 4 host devices equal one, two
processes on localhost (each reading its share of the LETOR files) equal one process, and the
padded collection equals each query computed alone, unpadded."""

import os
import socket
import subprocess
import sys
from functools import partial

import jax
import numpy as np
import pytest
from sharding_cases import PRIOR, flat, letor_problems, random_problems, write_letor_files

from bayesrank import EP, RBF, XPGP, parallel
from bayesrank.inference import ep
from bayesrank.parallel.plan import make_plan
from bayesrank.predict import predict_pairs

#: Several devices and processes, each process compiling its own programs: minutes in all.
pytestmark = pytest.mark.slow

WORKER = os.path.join(os.path.dirname(__file__), "collection_worker.py")
FIELDS = ("prob", "delta_var", "mean", "var", "log_evidence", "n_iter")
x64_only = pytest.mark.skipif(
    not jax.config.jax_enable_x64, reason="the 1e-12 agreement is a float64 claim"
)


def worker_env():
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)  # the worker sets its own device count
    env["JAX_PLATFORMS"] = "cpu"
    return env


@x64_only
def test_four_host_devices_equal_one_device(tmp_path):
    out = tmp_path / "devices.npz"
    done = subprocess.run(
        [sys.executable, WORKER, "devices", str(out)],
        env=worker_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    r = np.load(out)
    assert "4 devices" in str(r["plan"])
    for k in FIELDS:
        np.testing.assert_allclose(r[f"four_{k}"], r[f"one_{k}"], rtol=0, atol=1e-12, err_msg=k)
    assert float(r["ep_cov_diff"]) <= 1e-12


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@x64_only
def test_two_processes_equal_one_process(tmp_path):
    """Two processes of 2 CPU devices each join on localhost; each reads its share of three
    LETOR files; process 0 gets every query's result, equal to one process reading them all."""
    data = tmp_path / "letor"
    data.mkdir()
    write_letor_files(data)
    out = tmp_path / "two.npz"
    address = f"localhost:{free_port()}"
    procs = [
        subprocess.Popen(
            [sys.executable, WORKER, "process", str(out), str(data), str(k), "2", address],
            env=worker_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
    r = np.load(out)
    assert int(r["devices"]) == 4 and int(r["files"]) == 2  # process 0 read 2 of the 3 files
    files = sorted(str(data / f) for f in os.listdir(data))
    problems, tests = letor_problems(files)
    ref = flat(parallel.fit_predict(PRIOR, problems, tests, engine=EP(tol=1e-9)))
    for k in FIELDS:
        np.testing.assert_allclose(r[k], ref[k], rtol=0, atol=1e-12, err_msg=k)


def test_padded_collection_equals_each_query_alone_unpadded():
    """fit_predict over size groups (padded entities, pairs, test pairs and rows) against EP's
    pure core on each query's own unpadded K; a query without pairs keeps its prior."""
    problems, tests = random_problems()
    res = parallel.fit_predict(PRIOR, problems, tests, engine=EP(tol=1e-10))
    core = jax.jit(partial(ep.fit_core, max_iter=200, tol=1e-10))
    atol = 1e-10 if jax.config.jax_enable_x64 else 2e-3
    for q, (p, t) in enumerate(zip(problems, tests, strict=True)):
        K = PRIOR.covariance(
            p.X, [k.prepare(W) for k, W in zip(PRIOR.relations, p.relations, strict=True)]
        )
        if len(p.pairs):
            post = core(K, p.pairs)
            mean, cov = post.mean, post.cov
            assert res.n_iter[q] == post.n_iter
            np.testing.assert_allclose(res.log_evidence[q], post.log_evidence, atol=atol)
        else:
            mean, cov = np.zeros(p.n), K
            assert res.log_evidence[q] == 0
        want = predict_pairs(mean, cov, t)
        np.testing.assert_allclose(res.predictions[q].prob, want.prob, atol=atol)
        np.testing.assert_allclose(res.predictions[q].delta_var, want.delta_var, atol=atol)
        np.testing.assert_allclose(res.mean[q], mean, atol=atol)
        np.testing.assert_allclose(res.var[q], np.diag(cov), atol=atol)
    assert res.converged.all()


def test_plan_deals_each_group_evenly_and_counts_its_padding():
    rng = np.random.default_rng(3)
    n = rng.integers(5, 300, 200)
    sizes = np.c_[n, rng.integers(0, 400, 200), rng.integers(0, 50, 200), n // 2 + 2]
    owner = np.repeat([0, 1], [120, 80])
    plan = make_plan(sizes, owner, n_processes=2, devices_per_process=4, method="map")
    seen = np.concatenate([g.queries for g in plan.groups])
    assert sorted(seen) == list(range(200))
    for g in plan.groups:
        assert (sizes[g.queries, 0] <= g.n).all() and (sizes[g.queries, 1] <= max(g.m, 8)).all()
        assert (sizes[g.queries, 2] <= g.p).all() and (sizes[g.queries, 3] <= g.t).all()
        device = g.rows // g.rows_per_device
        assert len(set(g.rows)) == len(g.rows) and (device < 8).all()
        # each process's queries on its own devices, within one query of each other
        assert (device // 4 == owner[g.queries]).all()
        for proc in (0, 1):
            counts = np.bincount(device[owner[g.queries] == proc], minlength=8)[
                4 * proc : 4 * proc + 4
            ]
            assert counts.max() - counts.min() <= 1
    padded = sum(len(g.queries) * g.t**3 for g in plan.groups)
    assert plan.padding_waste() == pytest.approx(1 - np.sum(sizes[:, 3] ** 3.0) / padded)
    assert "200 queries" in plan.describe() and "8 devices" in plan.describe()


def test_collection_input_errors_name_the_culprit():
    problems, tests = random_problems(sizes=[(6, 5), (7, 6)])
    with pytest.raises(ValueError, match="2 problems but 1 test"):
        parallel.fit_predict(PRIOR, problems, tests[:1])
    bad = [tests[0], np.array([[0, 7]])]
    with pytest.raises(ValueError, match=r"test_pairs\[1\]"):
        parallel.fit_predict(PRIOR, problems, bad)
    with pytest.raises(ValueError, match="per_octave"):
        parallel.fit_predict(PRIOR, problems, tests, per_octave=0)
    with pytest.raises(ValueError, match="mesh"):
        parallel.fit_predict(PRIOR, problems, tests, mesh="cpu")
    with pytest.raises(ValueError, match="relation"):
        parallel.fit_predict(XPGP(RBF(), ()), problems, tests)
    with pytest.raises(ValueError, match="process_index"):
        parallel.process_share([1, 2, 3], process_index=2, process_count=2)
    assert parallel.process_share(list(range(5)), 1, 2) == [3, 4]
