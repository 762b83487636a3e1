"""``experiments/letor_baselines.py`` without its optional peers (xgboost, lightgbm): each is
skipped at the start with a one-line message, and the other methods' results are written.

The end-to-end run uses the bundled OHSUMED sample as a one-fold collection and blocks the peers'
imports (``sys.modules[name] = None``), whether or not they are installed here.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bayesrank.data.sample import sample_path

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "letor_baselines.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("letor_baselines", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # no work at import: the x64 flag is set in main()
    return module


def test_available_methods_skips_what_does_not_import(script):
    def fake_import(name):
        if name == "xgboost":
            raise ModuleNotFoundError("No module named 'xgboost'")
        if name == "lightgbm":
            raise OSError("libgomp.so.1: cannot open shared object file\nsecond line")

    methods, skipped = script.available_methods(
        ["RankSVM", "XGBoost", "LightGBM", "RankBoost"], fake_import
    )
    assert methods == ["RankSVM", "RankBoost"]
    assert list(skipped) == ["XGBoost", "LightGBM"]
    assert skipped["XGBoost"] == (
        "skipping XGBoost: cannot import xgboost (ModuleNotFoundError: No module named "
        "'xgboost'); pip install xgboost-cpu (or xgboost), or the bench extra "
        "(benchmarks/README.md)"
    )
    assert "\n" not in skipped["LightGBM"] and "libgomp.so.1" in skipped["LightGBM"]
    everything, none = script.available_methods(script.METHODS, lambda name: None)
    assert everything == script.METHODS and none == {}


def run(args, tmp_path):
    code = (
        "import runpy, sys\n"
        "sys.modules['xgboost'] = sys.modules['lightgbm'] = None  # as if not installed\n"
        f"sys.argv = [{str(SCRIPT)!r}, *{args!r}]\n"
        f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n"
    )
    env = dict(os.environ)  # the run's compilation cache (conftest)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path
    )


def test_the_script_skips_missing_peers_and_writes_the_rest(tmp_path):
    fold = tmp_path / "data" / "OHSUMED" / "QueryLevelNorm" / "Fold1"
    fold.mkdir(parents=True)
    for split in ("train", "vali", "test"):
        shutil.copy(sample_path(), fold / f"{split}.txt.gz")
    out = tmp_path / "out"
    args = ["--data-dir", str(tmp_path / "data"), "--datasets", "OHSUMED", "--folds", "1"]
    args += ["--methods", "XGBoost", "RankSVM", "LightGBM", "--C-grid", "1e-3", "--out", str(out)]
    done = run(args, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("skipping XGBoost: cannot import xgboost")
    assert lines[1].startswith("skipping LightGBM: cannot import lightgbm")
    assert lines[2].startswith("OHSUMED Fold1 RankSVM")  # the skips come first, at once
    results = json.loads((out / "results.json").read_text())
    assert list(results["results"]["OHSUMED"]) == ["RankSVM"]
    assert results["results"]["OHSUMED"]["RankSVM"][0]["chosen"] == {"C": 0.001}
    assert set(results["skipped"]) == {"XGBoost", "LightGBM"}
    assert (out / "table.md").is_file()

    nothing = run([*args[:6], "--methods", "XGBoost", "--out", str(out)], tmp_path)
    assert nothing.returncode == 1
    assert nothing.stdout.startswith("skipping XGBoost")
    assert "nothing to run" in nothing.stderr
