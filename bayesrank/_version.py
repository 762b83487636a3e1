"""The package's version, in a module of its own so that code inside the package reads it without
importing the top-level package (``tests/test_layers.py`` forbids that upward arrow). Keep it equal
to ``version`` in ``pyproject.toml``."""

__version__ = "0.1.0.dev0"
