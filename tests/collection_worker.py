"""A process of the sharding tests (tests/test_sharding.py), run as a script so that it can
choose its CPU device count (``--xla_force_host_platform_device_count``) and join a distributed
run before JAX starts.

    python collection_worker.py devices OUT            # 4 host devices: sharded vs one device
    python collection_worker.py process OUT DIR K P ADDRESS   # process K of P on 2 devices
"""

import os
import sys

role, out = sys.argv[1], sys.argv[2]
devices = 4 if role == "devices" else 2
os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

from bayesrank import EP, parallel  # noqa: E402

if role == "process":  # before anything starts JAX's backend
    parallel.initialize(sys.argv[6], int(sys.argv[5]), int(sys.argv[4]))

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from sharding_cases import PRIOR, flat, letor_problems, random_problems  # noqa: E402

if role == "devices":
    problems, tests = random_problems()
    assert len(jax.devices()) == 4
    four = parallel.fit_predict(PRIOR, problems, tests, engine=EP(tol=1e-9))
    one = parallel.fit_predict(
        PRIOR, problems, tests, engine=EP(tol=1e-9), mesh=parallel.query_mesh(jax.devices()[:1])
    )
    posts4 = parallel.fit_ep(PRIOR, problems, engine=EP(tol=1e-9))
    posts1 = parallel.fit_ep(
        PRIOR, problems, engine=EP(tol=1e-9), mesh=parallel.query_mesh(jax.devices()[:1])
    )
    np.savez(
        out,
        **{f"four_{k}": v for k, v in flat(four).items()},
        **{f"one_{k}": v for k, v in flat(one).items()},
        ep_cov_diff=max(
            float(np.max(np.abs(a.cov - b.cov))) for a, b in zip(posts4, posts1, strict=True)
        ),
        plan=four.plan.describe(),
    )
else:
    directory = sys.argv[3]
    files = sorted(os.listdir(directory))
    mine = parallel.process_share([os.path.join(directory, f) for f in files])
    problems, tests = letor_problems(mine)
    result = parallel.fit_predict(PRIOR, problems, tests, engine=EP(tol=1e-9))
    if jax.process_index() == 0:
        np.savez(out, files=len(mine), devices=len(jax.devices()), **flat(result))
