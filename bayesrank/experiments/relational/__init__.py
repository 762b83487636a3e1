"""The relational study of Kersting & Xu (2009, Sec. 6, Fig. 2), with the controls it lacks: do
relations help beyond an independent per-entity effect, and beyond a placebo graph?

``bayesrank experiment relational`` runs it (on the bundled sample by default);
``run_study`` is the same from Python::

    from bayesrank.experiments.relational import StudyConfig, run_study
    results = run_study(StudyConfig(collection="sample", repeats=1, known=(20,)))

``collections`` (the data), ``models`` (the GPs and SVMs), ``measures`` (error,
AUC, calibration, the seen/unseen breakdown, the tests), ``report`` (tables, figure),
``runner`` (the protocol, in child processes).
"""

from .collections import COLLECTIONS, load_collection
from .config import DEFAULT_KNOWN, StudyConfig
from .models import model_names
from .report import markdown, table
from .runner import FULL_STUDY, run_all, run_study, write

__all__ = [
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
]
