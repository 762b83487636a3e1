"""The package's shape (DESIGN.md, "Layout"): every import points down the layers, lazy imports
inside functions included, and no module runs past ~400 lines unless its docstring says why.

Reference: the source itself, parsed with ``ast`` (no import of the package).
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "bayesrank"

#: The layers, bottom to top. ``parallel`` sits below ``learning``: a shared ``theta``'s
#: objective is a sum over queries inside compiled steps, so learning maps its single-query
#: objectives with parallel's query map; parallel needs nothing from learning.
LAYERS = {
    "_moved": 0,
    "data": 0,
    "diagnostics": 0,
    "metrics": 0,
    "ordering": 0,
    "order_learning": 0,
    "runtime": 0,
    "threads": 0,
    "kernels": 1,
    "linalg": 2,
    "lanczos": 2,
    "querymap": 2,
    "likelihoods": 2,
    "predict": 2,
    "inference": 3,
    "baselines": 3,
    "label_ranking": 6,
    "parallel": 4,
    "learning": 5,
    "model": 6,
    "evaluation": 6,
    "active": 6,
    "plot": 6,
    "io": 6,
    "experiments": 6,
    "study": 6,
    "cli": 7,
    "__main__": 7,
}

#: A module longer than this says why in its docstring (a line starting "Length:").
MAX_LINES = 400


def modules():
    return sorted(p for p in PACKAGE.rglob("*.py"))


def top_level(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def imported_modules(path: Path):
    """``(line, top-level bayesrank module)`` of every import in ``path`` (relative or absolute)."""
    tree = ast.parse(path.read_text())
    package = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1]
    if path.name == "__init__.py":
        package = path.relative_to(PACKAGE.parent).parts[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = [*base, *(node.module.split(".") if node.module else [])]
                names = [target] if node.module else [[*base, a.name] for a in node.names]
            elif node.module and node.module.split(".")[0] == "bayesrank":
                names = [node.module.split(".")]
            else:
                continue
            for name in names:
                if len(name) > 1:
                    yield node.lineno, name[1]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "bayesrank" and len(parts) > 1:
                    yield node.lineno, parts[1]


def test_every_module_has_a_layer():
    missing = {top_level(p) for p in modules() if p.name != "__init__.py" or p.parent != PACKAGE}
    missing -= set(LAYERS)
    assert not missing, f"modules without a layer in LAYERS: {sorted(missing)}"


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
def test_long_modules_say_why(path):
    """Over 400 lines a module says why in its docstring; none reaches 500 (a module that
    grows past it has two jobs, and splits)."""
    lines = len(path.read_text().splitlines())
    assert lines < 500, f"{path.relative_to(PACKAGE)} has {lines} lines: split it along its jobs"
    if lines <= MAX_LINES:
        return
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    assert "Length:" in doc, f"{path.relative_to(PACKAGE)} has {lines} lines and no 'Length:' note"
