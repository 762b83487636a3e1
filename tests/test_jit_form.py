"""One way to compile, across the package (DESIGN.md, "One jit policy"): a module-level function
decorated ``@jax.jit``, or ``@partial(jax.jit, static_argnames=(...))`` where settings are
static. Cores stay pure; a façade calls such a decorated function. Parsed, not run: every file
of the package, so a new spelling fails here with its file and line."""

import ast
from pathlib import Path

import bayesrank

PACKAGE = Path(bayesrank.__file__).parent


def _is_jax_jit(node) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "jit"
        and isinstance(node.value, ast.Name)
        and node.value.id == "jax"
    )


def _allowed_decorator(node) -> bool:
    """``jax.jit`` or ``partial(jax.jit, static_argnames=<tuple of strings>)``."""
    if _is_jax_jit(node):
        return True
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return False
    if node.func.id != "partial" or len(node.args) != 1 or not _is_jax_jit(node.args[0]):
        return False
    if [k.arg for k in node.keywords] != ["static_argnames"]:
        return False
    names = node.keywords[0].value
    return isinstance(names, ast.Tuple) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in names.elts
    )


def _violations(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    allowed = set()  # ids of the jax.jit nodes inside allowed decorators of module-level defs
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                if _allowed_decorator(decorator):
                    allowed.update(id(n) for n in ast.walk(decorator) if _is_jax_jit(n))
    where = path.relative_to(root)
    found = []
    for node in ast.walk(tree):
        if _is_jax_jit(node) and id(node) not in allowed:
            found.append(f"{where}:{node.lineno}: jax.jit outside a module-level decorator")
        if isinstance(node, ast.ImportFrom) and node.module == "jax":
            if any(alias.name == "jit" for alias in node.names):
                found.append(f"{where}:{node.lineno}: 'from jax import jit' (write jax.jit)")
        if isinstance(node, ast.keyword) and node.arg == "static_argnums":
            found.append(f"{where}:{node.lineno}: static_argnums (name them: static_argnames)")
    return found


def test_the_package_compiles_in_one_form():
    found = [v for path in sorted(PACKAGE.rglob("*.py")) for v in _violations(path)]
    assert not found, "\n".join(found)


def test_the_check_catches_the_other_forms(tmp_path):
    """Each spelling the package used before has to fail the check."""
    bad = {
        "assigned": "import jax\nf = jax.jit(abs)\n",
        "partial applied": "import jax\nfrom functools import partial\n"
        "f = partial(jax.jit, static_argnames=('n',))(abs)\n",
        "inside a function": "import jax\ndef make():\n    @jax.jit\n    def f(x):\n"
        "        return x\n    return f\n",
        "returned": "import jax\ndef make(g):\n    return jax.jit(g)\n",
        "imported": "from jax import jit\n@jit\ndef f(x):\n    return x\n",
        "numbered": "import jax\nfrom functools import partial\n"
        "@partial(jax.jit, static_argnums=(1,))\ndef f(x, n):\n    return x\n",
        "functools.partial": "import functools\nimport jax\n"
        "@functools.partial(jax.jit, static_argnames=('n',))\ndef f(x, n):\n    return x\n",
    }
    for name, source in bad.items():
        path = tmp_path / f"{name.replace(' ', '_')}.py"
        path.write_text(source)
        assert _violations(path, tmp_path), name
    good = "import jax\nfrom functools import partial\n@jax.jit\ndef f(x):\n    return x\n"
    good += "@partial(jax.jit, static_argnames=('n',))\ndef g(x, n):\n    return x\n"
    path = tmp_path / "good.py"
    path.write_text(good)
    assert not _violations(path, tmp_path)
