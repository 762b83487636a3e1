"""Deprecated package: the relational study lives in ``bayesrank.experiments.relational``
(``from bayesrank.experiments.relational import StudyConfig, run_study``)."""

from .._moved import moved

__getattr__ = moved(
    __name__,
    dict.fromkeys(
        (
            "COLLECTIONS",
            "DEFAULT_KNOWN",
            "FULL_STUDY",
            "StudyConfig",
            "load_collection",
            "markdown",
            "model_names",
            "run_all",
            "run_study",
            "table",
            "write",
        ),
        "bayesrank.experiments.relational",
    ),
)
