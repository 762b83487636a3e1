"""Saving and loading fitted models: a versioned, documented file of arrays and JSON, no pickle.

    from bayesrank.io import load, save

    posterior = XPGPModel(prior).fit(problem, learn_hyperparameters=True)
    save(posterior, "model.npz")
    again = load("model.npz")            # no refit: predictions equal to the last bit
    again.predict_pairs(held_out).prob

- ``model_file``: ``save``, ``load``, ``load_metadata`` and the format (a table
  of keys in its docstring; ``docs/formats/model-file.md`` for users);
- ``archive``: the format's constants, reading the archive and checking it
  (``ModelFileError`` names the file and the key at fault);
- ``trees``: the library's pytrees (prior, engine results, learning result) to JSON nodes
  plus named arrays, and back.
"""

from __future__ import annotations

from .model_file import (
    FORMAT,
    FORMAT_VERSION,
    META_KEY,
    ModelFileError,
    load,
    load_metadata,
    save,
)

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "META_KEY",
    "ModelFileError",
    "load",
    "load_metadata",
    "save",
]
