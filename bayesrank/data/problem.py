"""One query's preference-learning problem: entities, their attributes and relations, pairs."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from . import userdata
from .checks import (
    check_adjacency,
    check_features,
    check_graded,
    check_grades,
    check_int,
    check_pairs,
    check_weights,
    max_weight,
)

__all__ = ["PreferenceProblem"]


@dataclass(frozen=True, eq=False)
class PreferenceProblem:
    """Validated host-side inputs of one query (use ``create``, or ``from_ratings`` /
    ``from_comparisons`` for ratings or comparisons in arrays or CSV files; ``checks``
    does the checking). A problem may have no pairs yet (the start of active learning).

    Attributes:
        pairs: ``(m, 2)`` int64, row ``(i, j)`` = *i preferred to j* (duplicates and contradicting
            pairs allowed: they are noisy observations).
        n: number of entities.
        X: ``(n, d)`` float64 attributes, or ``None``.
        relations: one ``(n, n)`` weighted adjacency per relation type (validated: square,
            symmetric, finite, non-negative; zero diagonal).
        ties: ``(m_t, 2)`` int64, row ``(i, j)`` = *i and j judged equal* (the tie model of
            ``bayesrank.likelihoods``: the prior needs a tie margin, ``XPGP(margin=...)``).
            A pair may be found in ``pairs`` and in ``ties``: both judgements count.
        weights: ``(m,)`` float64 > 0, each pair's weight (how many times it was judged: a row
            of weight ``c`` equals ``c`` copies), or None (all 1).
        tie_weights: ``(m_t,)`` float64 > 0, each tie's weight, or None (all 1).
        graded: ``(m_g, 2)`` int64, row ``(i, k)`` = *entity i was given grade k* (``0..K-1``,
            higher preferred: the ordinal model of ``bayesrank.likelihoods``; the prior needs
            ``K - 1`` thresholds, ``XPGP(threshold=..., threshold_gaps=...)``). An entity may be
            graded several times.
        grade_weights: ``(m_g,)`` float64 > 0, each grade's weight, or None (all 1).

    The engines see one list of rows, ``pairs``, ``ties``, then one ``(i, n)`` per grade
    (``rows``: entity ``n`` is an *anchor* whose value is 0, so a grade's ``d = xi_i - 0``), with
    their outcomes (``outcomes``); a fit's sites follow that order.
    """

    pairs: np.ndarray
    n: int
    X: np.ndarray | None = None
    relations: tuple[np.ndarray, ...] = ()
    ties: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    weights: np.ndarray | None = None
    tie_weights: np.ndarray | None = None
    graded: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    grade_weights: np.ndarray | None = None

    @property
    def has_outcomes(self) -> bool:
        """Whether the problem has ties, grades or weights (else: probit pairs)."""
        weighted = (self.weights, self.tie_weights, self.grade_weights)
        return len(self.ties) > 0 or self.anchored or any(w is not None for w in weighted)

    @property
    def anchored(self) -> bool:
        """Whether the rows use the anchor entity ``n`` (the problem has grades)."""
        return len(self.graded) > 0

    @property
    def rows(self) -> np.ndarray:
        """``(m + m_t + m_g, 2)``: the pairs, the ties, then ``(i, n)`` per grade of entity
        ``i`` (``n``: the anchor): the rows the engines fit."""
        if not (len(self.ties) or self.anchored):
            return self.pairs
        anchor = np.column_stack([self.graded[:, 0], np.full(len(self.graded), self.n)])
        return np.concatenate([self.pairs, self.ties, anchor.astype(np.int64)])

    def outcomes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(tie, grade, weight)`` of each of ``rows``: bool, int64 (-1 for a pair or a tie)
        and float64, ``(m + m_t + m_g,)`` each."""
        m, m_t, m_g = len(self.pairs), len(self.ties), len(self.graded)
        tie = np.concatenate([np.zeros(m, bool), np.ones(m_t, bool), np.zeros(m_g, bool)])
        grade = np.concatenate([np.full(m + m_t, -1, np.int64), self.graded[:, 1]])
        weight = np.concatenate(
            [
                np.ones(count) if w is None else w
                for count, w in (
                    (m, self.weights),
                    (m_t, self.tie_weights),
                    (m_g, self.grade_weights),
                )
            ]
        )
        return tie, grade, weight

    def require_pairs_only(self, what: str) -> None:
        """``ValueError`` if the problem has ties, grades or weights, which ``what`` does not
        take."""
        if self.has_outcomes:
            raise ValueError(
                f"{what} takes pairs only, but the problem has {len(self.ties)} ties, "
                f"{len(self.graded)} grades"
                f"{' and weights' if self.weights is not None else ''}: fit it with "
                "XPGPModel.fit or fit_hyperparameters, which take them"
            )

    def merged(self, dtype=None) -> PreferenceProblem:
        """The same problem with repeated judgements merged: one row per distinct pair and one
        per distinct tie (``{i, j}`` unordered), weighted by its total weight (its count).
        The likelihood, and so every engine's posterior, is unchanged; EP has fewer sites.

        A total above ``checks.max_weight(dtype)`` (the largest weight a row may carry, 4.5e9 in
        float64) is split into equal rows below it (never more than were merged), so that the
        merged problem fits wherever the original does; ``dtype``: the float it is fitted in
        (None: JAX's default float, float32 with x64 off). A kind of row given without weights
        whose rows are all distinct keeps ``None`` (all 1): the engines that take pairs only take
        the merged problem too."""
        if dtype is None:
            import jax.numpy as jnp  # the working float is JAX's, decided at call time

            dtype = jnp.result_type(float)
        top = max_weight(dtype)

        def merge(rows, weights, ordered):
            if not len(rows):
                return rows, None
            keys = rows if ordered else np.sort(rows, axis=1)
            distinct, inverse = np.unique(keys, axis=0, return_inverse=True)
            w = np.ones(len(rows)) if weights is None else weights
            total = np.bincount(inverse.ravel(), weights=w, minlength=len(distinct))
            if weights is None and len(distinct) == len(rows):
                return distinct, None
            parts = np.ceil(total / top)
            parts += total / parts > top  # the quotient rounded up past the bound
            # never more rows than were merged: a total above that many times the bound has a
            # row above it already, which the fit refuses in either form
            parts = np.minimum(parts, np.bincount(inverse.ravel())).astype(np.int64)
            return np.repeat(distinct, parts, axis=0), np.repeat(total / parts, parts)

        pairs, weights = merge(self.pairs, self.weights, True)
        ties, tie_weights = merge(self.ties, self.tie_weights, False)
        graded, grade_weights = merge(self.graded, self.grade_weights, True)
        return PreferenceProblem(
            pairs=pairs,
            n=self.n,
            X=self.X,
            relations=self.relations,
            ties=ties,
            weights=weights,
            tie_weights=tie_weights,
            graded=graded,
            grade_weights=grade_weights,
        )

    @classmethod
    def create(
        cls,
        pairs,
        X=None,
        relations: Sequence = (),
        n: int | None = None,
        *,
        ties=None,
        weights=None,
        tie_weights=None,
        graded=None,
        grade_weights=None,
    ) -> PreferenceProblem:
        """Check and assemble a problem; ``n`` defaults to ``len(X)`` or the relations' size.

        ``ties``: ``(m_t, 2)`` pairs judged equal; ``graded``: ``(m_g, 2)`` rows ``(entity,
        grade)``, integer grades ``>= 0``; ``weights``, ``tie_weights``, ``grade_weights``: each
        row's weight (> 0 and at most ``checks.max_weight()``, 4.5e9: EP's round-off grows with
        the weight; None: 1), e.g. how many times it was judged (class docstring)."""
        if X is not None:
            X = check_features(X)
        relations = () if relations is None else relations
        if isinstance(relations, Iterator):  # a generator of adjacencies: taken once
            relations = tuple(relations)
        if isinstance(relations, np.ndarray) or not isinstance(relations, Sequence):
            raise ValueError(
                "relations must be a list of (n, n) adjacency matrices (one per relation type), "
                f"got {type(relations).__name__}"
            )
        rels = tuple(check_adjacency(W, name=f"relations[{r}]") for r, W in enumerate(relations))
        said = [f"X has {len(X)} rows"] if X is not None else []
        sizes = {len(X)} if X is not None else set()
        for r, W in enumerate(rels):
            said.append(f"relations[{r}] is {W.shape[0]} x {W.shape[0]}")
            sizes.add(W.shape[0])
        if n is not None:
            sizes.add(check_int(n, "n", low=1))
            said.append(f"n = {n}")
        if not sizes:
            raise ValueError(
                "the number of entities is unknown: give X (n, d), relations or n, e.g. "
                "PreferenceProblem.create(pairs, n=10)"
            )
        if len(sizes) != 1:
            raise ValueError(
                f"X, relations and n disagree on the number of entities: {', '.join(said)}"
            )
        (n,) = sizes
        summary = check_pairs(pairs, n)
        tie_rows = (
            np.zeros((0, 2), np.int64) if ties is None else check_pairs(ties, n, "ties").pairs
        )
        if weights is not None:
            weights = check_weights(weights, len(summary.pairs), "weights")
        if tie_weights is not None:
            if ties is None:
                raise ValueError("tie_weights without ties: give ties=(m_t, 2) beside them")
            tie_weights = check_weights(tie_weights, len(tie_rows), "tie_weights")
        graded_rows = np.zeros((0, 2), np.int64) if graded is None else check_graded(graded, n)
        if grade_weights is not None:
            if graded is None:
                raise ValueError("grade_weights without grades: give graded=(m_g, 2) beside them")
            grade_weights = check_weights(grade_weights, len(graded_rows), "grade_weights")
        return cls(
            pairs=summary.pairs,
            n=n,
            X=X,
            relations=rels,
            ties=tie_rows,
            weights=weights,
            tie_weights=tie_weights,
            graded=graded_rows,
            grade_weights=grade_weights,
        )

    @classmethod
    def from_grades(
        cls, grades, X=None, relations: Sequence = (), n: int | None = None
    ) -> PreferenceProblem:
        """A problem of graded entities for the ordinal model: ``grades: (n,)`` integers
        ``0..K-1`` (higher preferred; ``K - 1 <= checks.MAX_GRADE``; bool, strings and complex
        numbers are refused), ``NaN`` for an entity without a grade (still a row).
        Its prior needs ``K - 1`` thresholds (``XPGP(threshold=..., threshold_gaps=...)``)."""
        # real numbers (bool, str and complex refused, naming the index), NaN for no grade;
        # whole, >= 0 and at most MAX_GRADE: create's check_graded
        values = check_grades(grades, name="grades", missing=True, bools=False)
        rated = np.flatnonzero(~np.isnan(values))
        graded = np.column_stack([rated, values[rated]])
        n = len(values) if n is None else n
        return cls.create(np.zeros((0, 2), np.int64), X, relations, n=n, graded=graded)

    @classmethod
    def from_ratings(
        cls, ratings, X=None, relations: Sequence = (), *, ties="skip", entities=None, header=None
    ) -> PreferenceProblem:
        """A problem whose pairs are implied by ratings: every two rated entities with different
        ratings give a pair, the higher rated first (as ``pairs_from_grades``).

        Args:
            ratings: ``(n,)`` real numbers (a bool, a string or a complex number is refused,
                naming its index), ``NaN`` for an unrated entity (in no pair, but still a row);
                or a path to a CSV file of lines ``entity,rating`` (optional header line;
                entities not listed are unrated).
            X: ``(n, d)`` attributes or None; relations: ``(n, n)`` adjacencies.
            ties: ``"skip"``: equal ratings give no pair; ``"both"``: a pair each way;
                ``"tie"``: a tie (the tie model: the prior needs a margin, ``XPGP(margin=...)``).
            entities: ids naming the rows of a file (row ``i`` is ``entities[i]``); None: the
                file's entity field is a 0-based row index.
            header: whether a file's first line is a header (None: when it is not data).

        ``n`` is ``len(ratings)`` for an array; for a file, from ``entities``, ``X`` or the
        relations, else the largest index + 1. File format, ids and messages (the file and
        1-based line at fault): ``bayesrank.data.userdata``.
        """
        relations = tuple(relations) if isinstance(relations, Iterator) else relations
        read, n = userdata.ratings_pairs(
            ratings, X, relations, ties=ties, entities=entities, header=header
        )
        return cls.create(read.pairs, X, relations, n=n, ties=read.ties if ties == "tie" else None)

    @classmethod
    def from_comparisons(
        cls, source, X=None, relations: Sequence = (), *, entities=None, header=None
    ) -> PreferenceProblem:
        """A problem from comparisons ``winner, loser``, and in a file ties and weights.

        Args:
            source: ``(m, 2)`` rows (indices, or ids with ``entities``), or a path to a CSV file
                of lines ``winner,loser``, ``a,b,tie``, each optionally ``,weight`` (optional
                header line; a file with ties needs a prior with a tie margin).
            X: ``(n, d)`` attributes or None; relations: ``(n, n)`` adjacencies.
            entities: ids naming the rows (row ``i`` is ``entities[i]``; for a file without
                ``X``, ``entity_ids`` numbers them in file order); None: indices.
            header: whether a file's first line is a header (None: when neither field is an
                entity).

        ``n`` comes from ``entities``, ``X`` or the relations, else the largest index + 1.
        Malformed lines, unknown entities and self-comparisons raise ``ValueError`` naming the
        file and 1-based line (``bayesrank.data.userdata``).
        """
        relations = tuple(relations) if isinstance(relations, Iterator) else relations
        read, n = userdata.comparisons_pairs(source, X, relations, entities=entities, header=header)
        return cls.create(
            read.pairs,
            X,
            relations,
            n=n,
            ties=read.ties if len(read.ties) else None,
            weights=read.weights,
            tie_weights=read.tie_weights,
        )
