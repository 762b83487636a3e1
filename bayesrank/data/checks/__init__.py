"""Host-side validation at the library's boundary: one NumPy check per kind of input.

Readers, public constructors and façades check their inputs here, once, before anything is traced
or compiled (inside compiled code nothing is checked). Every check either returns the input in a
canonical form (dtype and shape stated in its docstring) or raises ``ValueError`` with a message
that names the argument, the offending index and its value, e.g.
``pairs[3, 1] = 12 is not an entity index (n = 10): out of range [0, 10)``.

Nothing is cast lossily: a float where an integer is expected is accepted only when it is whole
(and never for an option such as ``n_rounds=2.5``); ``bool`` is not an integer; complex, string and
object arrays are rejected rather than cast (NumPy would drop an imaginary part with a mere warning
and parse strings as numbers).

Two message dialects exist for pairs, both kept because they are published, tested contracts:
``check_pairs`` (alias ``validate_pairs``) and ``check_pair_array`` speak of *rows*
(``pairs row 1: index 5 is out of range for n=5 entities``); the prediction and problem checks
name the element (``pairs[1, 1] = 9 is not an entity index (n = 7): ...``).

One module a kind of input (``options``, ``arrays``, ``pairs``, ``outcomes``,
``covariance``); everything is imported from ``bayesrank.data.checks``. ``formatting`` holds the
message helpers (``show_value``, ``index_text``, ...) that other packages' checks use too. Layer 0:
NumPy only.
"""

from .arrays import (
    ADJACENCY_SYMMETRY_RTOL,
    check_adjacency,
    check_distinct,
    check_features,
    check_fits_dtype,
    check_grades,
    check_matrix,
    check_query_ids,
    check_ranking_data,
    check_variances,
)
from .covariance import (
    COVARIANCE_PSD_RTOL,
    COVARIANCE_SYMMETRY_RTOL,
    check_covariance,
    check_problem,
)
from .options import MAX_SEED, check_bool, check_choice, check_float, check_int
from .outcomes import (
    MAX_GRADE,
    check_grade_levels,
    check_graded,
    check_intervals,
    check_margin,
    check_outcomes,
    check_weights,
    max_margin,
    max_weight,
)
from .pairs import (
    PairSummary,
    check_entity_indices,
    check_group_ids,
    check_index_pairs,
    check_pair_array,
    check_pair_mask,
    check_pairs,
)

__all__ = [
    "ADJACENCY_SYMMETRY_RTOL",
    "COVARIANCE_PSD_RTOL",
    "COVARIANCE_SYMMETRY_RTOL",
    "MAX_GRADE",
    "MAX_SEED",
    "PairSummary",
    "check_adjacency",
    "check_bool",
    "check_choice",
    "check_covariance",
    "check_distinct",
    "check_entity_indices",
    "check_features",
    "check_fits_dtype",
    "check_float",
    "check_grade_levels",
    "check_graded",
    "check_grades",
    "check_group_ids",
    "check_index_pairs",
    "check_int",
    "check_intervals",
    "check_margin",
    "check_matrix",
    "check_outcomes",
    "check_pair_array",
    "check_pair_mask",
    "check_pairs",
    "check_problem",
    "check_query_ids",
    "check_ranking_data",
    "check_variances",
    "check_weights",
    "max_margin",
    "max_weight",
]
