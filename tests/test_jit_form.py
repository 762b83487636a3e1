"""One way to compile, across the package (DESIGN.md, "One jit policy"): a module-level function
decorated ``@jit``, or ``@partial(jit, static_argnames=(...))`` where settings are static, with
``jit`` imported from ``bayesrank.compiler`` (``jax.jit`` with the package's XLA options, so
that every program compiles with them). Cores stay pure; a façade calls such a decorated
function. Parsed, not run: every file of the package, so a new spelling fails here with its
file and line."""

import ast
from pathlib import Path

import bayesrank

PACKAGE = Path(bayesrank.__file__).parent
#: The one module that spells ``jax.jit``: it defines ``jit``.
COMPILER = PACKAGE / "compiler.py"


def _is_jax_jit(node) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "jit"
        and isinstance(node.value, ast.Name)
        and node.value.id == "jax"
    )


def _is_jit(node) -> bool:
    return isinstance(node, ast.Name) and node.id == "jit"


def _allowed_decorator(node) -> bool:
    """``jit`` or ``partial(jit, static_argnames=<tuple of strings>)``."""
    if _is_jit(node):
        return True
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return False
    if node.func.id != "partial" or len(node.args) != 1 or not _is_jit(node.args[0]):
        return False
    if [k.arg for k in node.keywords] != ["static_argnames"]:
        return False
    names = node.keywords[0].value
    return isinstance(names, ast.Tuple) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in names.elts
    )


def _violations(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    allowed = set()  # ids of the jit nodes inside allowed decorators of module-level defs
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                if _allowed_decorator(decorator):
                    allowed.update(id(n) for n in ast.walk(decorator) if _is_jit(n))
    where = path.relative_to(root)
    found = []
    imported = False  # jit from bayesrank.compiler
    for node in ast.walk(tree):
        if _is_jax_jit(node):
            found.append(f"{where}:{node.lineno}: jax.jit (write bayesrank.compiler's jit)")
        if _is_jit(node) and isinstance(node.ctx, ast.Load) and id(node) not in allowed:
            found.append(f"{where}:{node.lineno}: jit outside a module-level decorator")
        if isinstance(node, ast.ImportFrom) and any(a.name == "jit" for a in node.names):
            if (node.module or "").split(".")[-1] == "compiler" and node.level > 0:
                imported = True
            else:
                found.append(f"{where}:{node.lineno}: jit imported from {node.module!r}")
        if isinstance(node, ast.keyword) and node.arg == "static_argnums":
            found.append(f"{where}:{node.lineno}: static_argnums (name them: static_argnames)")
    if allowed and not imported:
        found.append(f"{where}: jit used but not imported from bayesrank.compiler")
    return found


def test_the_package_compiles_in_one_form():
    paths = sorted(p for p in PACKAGE.rglob("*.py") if p != COMPILER)
    found = [v for path in paths for v in _violations(path)]
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
        "plain jax.jit": "import jax\n@jax.jit\ndef f(x):\n    return x\n",
        "jit from elsewhere": "from .tools import jit\n@jit\ndef f(x):\n    return x\n",
        "jit not imported": "@jit\ndef f(x):\n    return x\n",
        "our jit applied": "from .compiler import jit\nf = jit(abs)\n",
        "our jit inside": "from .compiler import jit\ndef make():\n    @jit\n"
        "    def f(x):\n        return x\n    return f\n",
    }
    for name, source in bad.items():
        path = tmp_path / f"{name.replace(' ', '_')}.py"
        path.write_text(source)
        assert _violations(path, tmp_path), name
    good = "from functools import partial\nfrom ..compiler import jit\n"
    good += "@jit\ndef f(x):\n    return x\n"
    good += "@partial(jit, static_argnames=('n',))\ndef g(x, n):\n    return x\n"
    path = tmp_path / "good.py"
    path.write_text(good)
    assert not _violations(path, tmp_path)
