"""The documentation runs: every Python block of README.md and docs/**/*.md; the site builds.

Per Markdown file, its ``python`` blocks run in order in one namespace, as a notebook would run
them, with float64 enabled first and the working directory a fresh temporary folder; a
``ConvergenceWarning`` is an error (an example whose fit stops at its cap is a broken example).
All files run in one child process (one JAX import and one set of compiled programs for all of
them, each file in a fresh namespace, XLA's options at their defaults), which writes one JSON line
per file; each file is one test here.
Complete, cheap ``bayesrank`` command lines of ``bash`` blocks (``bayesrank data summary``) run
too, through ``python -m bayesrank``; other shell lines are left alone (``pip`` is never run).

Blocks that are not meant to run (output, pseudo-code, formats) carry another language tag
(``text``). A block that needs an optional package (matplotlib, ...) that is not installed skips
its file, saying which. ``mkdocs build --strict`` runs where MkDocs is installed (the ``docs``
extra) and skips, saying why, where it is not.

``python tests/test_docs.py FILE ...`` runs the blocks of the given files directly (the child
process's entry point) and prints one JSON line per file.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

#: Fence languages whose blocks are executed.
PYTHON = {"python", "py", "python3"}
#: Optional packages: a block that fails to import one of these skips its file.
OPTIONAL = {"matplotlib", "tqdm", "sklearn", "choix", "botorch", "torch", "xgboost", "lightgbm"}
#: Command lines (after ``bayesrank``, ``--json`` aside) cheap enough to run: the bundled sample.
CHEAP_COMMANDS = (("data", "summary"),)

#: A ``text`` block with this in its info string (```` ```text title="output" ````) shows what
#: the ``python`` block just before it prints: the run checks it, line by line (trailing blanks
#: aside), so a page that shows output shows the output its code gives.
OUTPUT_TITLE = 'title="output"'

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`]*)$")


def code_blocks(path: Path) -> list[tuple[str, int, str]]:
    """``(language, line number of the opening fence, code)`` of every fenced block of a
    Markdown file, in order (the code dedented by its fence's indentation)."""
    blocks = []
    lines = path.read_text(encoding="utf-8").splitlines()
    k = 0
    while k < len(lines):
        match = _FENCE.match(lines[k])
        if not match:
            k += 1
            continue
        indent, fence = match["indent"], match["fence"]
        info = match["info"].strip()
        language = re.split(r"[\s{]", info.lstrip("{.").strip(), maxsplit=1)[0] if info else ""
        start, body = k + 1, []
        k += 1
        while k < len(lines):
            line = lines[k]
            if line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
                break
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            k += 1
        if language.lower() == "text" and OUTPUT_TITLE in info:
            language = "output"  # what the python block before it prints, checked
        blocks.append((language.lower(), start, "\n".join(body) + "\n"))
        k += 1
    return blocks


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def cheap_command(line: str) -> list[str] | None:
    """The argv of a complete, cheap ``bayesrank`` command line, else None."""
    line = line.split("#", 1)[0].strip()
    if not line.startswith(("bayesrank ", "python -m bayesrank ")) or "pip" in line:
        return None
    if any(c in line for c in "[]<>|&;$`") or "..." in line:
        return None
    argv = shlex.split(line)
    argv = argv[3:] if argv[0] == "python" else argv[1:]
    if any(a.isupper() and a.isalpha() for a in argv):  # a placeholder such as PATH
        return None
    words = tuple(a for a in argv if a != "--json")
    return [sys.executable, "-m", "bayesrank", *argv] if words in CHEAP_COMMANDS else None


# --- the child process: run the blocks --------------------------------------------------------


def _run_file(path: Path) -> dict:
    import jax

    jax.config.update("jax_enable_x64", True)
    namespace = {"__name__": "__docs__", "__file__": str(path)}
    record = {"file": _name(path), "status": "ok", "blocks": 0, "commands": 0, "times": []}
    start, cpu = time.perf_counter(), time.process_time()
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as work:
        os.chdir(work)
        try:
            printed = None  # what the last python block printed
            for language, line, code in code_blocks(path):
                if language == "output":
                    record["outputs"] = record.get("outputs", 0) + 1
                    _check_output(printed, code, line)
                elif language in PYTHON:
                    record["blocks"] += 1
                    tick = time.perf_counter()
                    try:
                        with warnings.catch_warnings(), contextlib.redirect_stdout(
                            io.StringIO()
                        ) as out:
                            _errors_for_convergence_warnings()
                            # dont_inherit: the blocks run as a user's script would, without
                            # this file's ``from __future__ import annotations`` (under which a
                            # dataclass defined in a block looks for a module that is not there)
                            name = f"{_name(path)}:{line}"
                            exec(compile(code, name, "exec", dont_inherit=True), namespace)
                        printed = out.getvalue()
                        record["times"].append((line, round(time.perf_counter() - tick, 2)))
                    except ModuleNotFoundError as err:
                        if (err.name or "").split(".")[0] in OPTIONAL:
                            record.update(status="skip", reason=f"needs {err.name} (line {line})")
                            break
                        raise
                elif language in ("bash", "sh", "console", "shell"):
                    for text in code.splitlines():
                        argv = cheap_command(text)
                        if argv is None:
                            continue
                        record["commands"] += 1
                        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
                        if done.returncode != 0:
                            raise RuntimeError(
                                f"line {line}: `{text.strip()}` exited with {done.returncode}:\n"
                                f"{done.stderr[-2000:]}"
                            )
        except BaseException:  # reported to the test, which fails
            record.update(status="error", error=traceback.format_exc(limit=-8))
        finally:
            os.chdir(cwd)
    record["seconds"] = round(time.perf_counter() - start, 2)
    record["cpu_seconds"] = round(time.process_time() - cpu, 2)
    return record


def _check_output(printed: str | None, shown: str, line: int) -> None:
    """The output block at ``line`` (``shown``) is what the python block before it printed."""
    if printed is None:
        raise RuntimeError(f"line {line}: an output block with no python block before it")
    got, want = ([x.rstrip() for x in t.strip("\n").splitlines()] for t in (printed, shown))
    if got != want:
        raise RuntimeError(
            f"line {line}: the page shows\n{chr(10).join(want)}\nbut the block above it "
            f"printed\n{chr(10).join(got)}"
        )


def _errors_for_convergence_warnings() -> None:
    """An example whose fit hits its iteration cap is a broken example."""
    from bayesrank.diagnostics import ConvergenceWarning

    warnings.simplefilter("error", ConvergenceWarning)


def main(paths: list[str]) -> None:
    os.environ.setdefault("BAYESRANK_CACHE_DIR", "off")
    for p in paths:
        with contextlib.redirect_stdout(io.StringIO()):
            record = _run_file(Path(p).resolve())
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)


# --- the tests --------------------------------------------------------------------------------

import pytest  # noqa: E402

#: Files whose blocks are known to fail, with the reason (an entry goes once the file runs).
KNOWN_FAILING: dict[str, str] = {}


def _runnable(path: Path) -> bool:
    return any(
        lang in PYTHON or (lang in ("bash", "sh") and any(map(cheap_command, code.splitlines())))
        for lang, _, code in code_blocks(path)
    )


def _params():
    out = []
    for path in doc_files():
        if not _runnable(path):
            continue
        name = _name(path)
        marks = [pytest.mark.xfail(reason=KNOWN_FAILING[name])] if name in KNOWN_FAILING else []
        out.append(pytest.param(name, id=name, marks=marks))
    return out


@pytest.fixture(scope="module")
def results(request) -> dict:
    """The record of every file whose test was collected, from one child process per run: xdist
    workers share it through the run's own directory (conftest's ``BAYESRANK_CACHE_DIR``), the
    first computing it under a lock and the others reading it, so the files run once."""
    names = [
        item.callspec.params["name"]
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_code_blocks_run"
    ]
    files = [str(ROOT / name) for name in dict.fromkeys(names)]
    shared = os.environ.get("BAYESRANK_CACHE_DIR")
    try:
        import fcntl  # POSIX; elsewhere each worker runs the files itself
    except ImportError:
        fcntl = None
    if fcntl is None or not shared or shared == "off" or not Path(shared).is_dir():
        return _run_doc_files(files)
    import hashlib

    key = hashlib.sha256("\n".join(files).encode()).hexdigest()[:16]
    stored = Path(shared) / f"doc-blocks-{key}.json"
    with open(Path(shared) / "doc-blocks.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not stored.is_file():
            stored.write_text(json.dumps(_run_doc_files(files)))
        return json.loads(stored.read_text())


def _run_doc_files(files: list[str]) -> dict:
    """Every file's code blocks in one child process: ``{file: record}``."""
    # the run's compilation cache (conftest), shared with the other tests' programs
    env = {**os.environ, "JAX_ENABLE_X64": "1"}
    done = subprocess.run(
        [sys.executable, __file__, *files],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=1200,
    )
    records = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            records[record["file"]] = record
    records["_stderr"] = done.stderr[-4000:]
    records["_returncode"] = done.returncode
    return records


@pytest.mark.parametrize("name", _params())
@pytest.mark.slow
def test_code_blocks_run(name, results):
    record = results.get(name)
    if record is None:
        pytest.fail(
            f"{name}: no result (the child process exited with {results['_returncode']}):\n"
            f"{results['_stderr']}"
        )
    if record["status"] == "skip":
        pytest.skip(f"{name}: {record['reason']}")
    assert record["status"] == "ok", f"{name}:\n{record.get('error')}"


def test_every_fence_names_its_language():
    """An unlabelled fence could hide Python that never runs: every block says what it is."""
    bare = [
        f"{_name(p)}:{line}"
        for p in doc_files()[1:]
        for lang, line, _ in code_blocks(p)
        if not lang
    ]
    assert not bare, f"code blocks without a language (use ```text for output): {bare}"


def test_cheap_command_rules():
    assert cheap_command("bayesrank data summary") is not None
    assert cheap_command("bayesrank data summary --json   # as JSON") is not None
    assert cheap_command("bayesrank data summary PATH [PATH ...] [--json]") is None
    assert cheap_command("python -m pip install . && bayesrank data summary") is None
    assert cheap_command("bayesrank experiment relational") is None
    assert cheap_command("ls") is None


@pytest.mark.slow
def test_site_builds_strict(tmp_path):
    """``mkdocs build --strict``: the nav, every link and anchor, and the API pages rendered by
    mkdocstrings from the docstrings, without a warning."""
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        if importlib.util.find_spec(module.split(".")[0]) is None or (
            "." in module and importlib.util.find_spec(module) is None
        ):
            pytest.skip(f"needs {module} (pip install '.[docs]')")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner about MkDocs 2
    command = ["build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")]
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", *command],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert "WARNING" not in output, output[-6000:]
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "api" / "model" / "index.html").is_file()
    # no page shows a Sphinx role as text (mkdocstrings renders Markdown, not reST roles:
    # "Model and posterior" printed 531 of them)
    roles = re.compile(r":(func|class|mod|meth|attr|data|obj|exc):(`|<code>)")
    shown = {
        str(page.relative_to(tmp_path / "site")): len(roles.findall(page.read_text()))
        for page in (tmp_path / "site").rglob("*.html")
    }
    assert not {page: n for page, n in shown.items() if n}, shown
    pages = {str(p.relative_to(tmp_path / "site")): p.read_text() for p in
             (tmp_path / "site").rglob("*.html")}  # fmt: skip
    # an entry naming several parameters ("tol, rtol: ...") is a row per name, not "tol," with
    # rtol in the Type column (docs/_hooks/split_names.py)
    two_names = re.compile(r'<td><code><span title="[^"]*">[^<]*,</span></code></td>')
    assert not {page for page, text in pages.items() if two_names.search(text)}
    assert 'title="bayesrank.kernels.xpgp.XPGP.threshold_gaps"' in pages["api/kernels/index.html"]
    # the maths is MathML, rendered at build time: no TeX left, no script fetched from the web
    # (docs/_hooks/mathml.py), so a site opened offline shows it
    assert not {page for page, text in pages.items() if 'class="arithmatex"' in text}
    assert not {page for page, text in pages.items() if "mathjax" in text.lower()}
    assert sum(text.count("<math ") for text in pages.values()) > 300


def test_the_readme_tour_imports_from_the_top_level():
    """The README's Python imports from ``bayesrank`` and at most one subpackage (issue 33: it
    imported from five module paths), and every name it imports is in ``bayesrank.__all__``."""
    import ast

    import bayesrank

    modules, names = set(), []
    for lang, _, code in code_blocks(ROOT / "README.md"):
        if lang not in PYTHON:
            continue
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.ImportFrom) and node.module.startswith("bayesrank"):
                modules.add(node.module)
                if node.module == "bayesrank":
                    names += [alias.name for alias in node.names]
    assert "bayesrank" in modules and len(modules - {"bayesrank"}) <= 1, modules
    assert set(names) <= set(bayesrank.__all__), set(names) - set(bayesrank.__all__)
    assert all(hasattr(bayesrank, name) for name in bayesrank.__all__)


#: What a user cannot follow: the project's issue numbers ("issue 31", "#31") and its seed notes
#: (the source documents the project started from, outside the repository). Development notes
#: (``docs/development/``) and the tests may name them.
_INTERNAL = re.compile(
    r"\bissues? #?\d+|(?<![\w/&#])#\d{1,3}\b|\bseed notes?\b|shared/seeds/|\bthe seed `",
    re.IGNORECASE,
)
#: Docstrings still to be mended by their owners (remove an entry once its file is clean).
_PENDING: set[str] = set()


def _docstrings(path: Path):
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield getattr(node, "lineno", 1), doc


def test_user_pages_and_docstrings_name_no_issue_numbers_or_seed_notes():
    found = []
    for page in doc_files():
        if DOCS / "development" in page.parents:
            continue
        for k, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            if match := _INTERNAL.search(line):
                found.append(f"{page.relative_to(ROOT)}:{k}: {match[0]!r}")
    package = ROOT / "bayesrank"
    for path in sorted(package.rglob("*.py")):
        if str(path.relative_to(package)) in _PENDING:
            continue
        for lineno, doc in _docstrings(path):
            if match := _INTERNAL.search(doc):
                found.append(f"{path.relative_to(ROOT)}:{lineno}: {match[0]!r}")
    assert not found, "\n".join(found)
