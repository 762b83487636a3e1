"""The LETOR reader's fast path: one vectorised pass over the feature text of a whole file
(:mod:`bayesrank.data.letor` takes the lines it does not accept to its slow, exact path)."""

from __future__ import annotations

import numpy as np

# Byte classes and the transitions of the fast path's automaton. The feature text of the whole
# file is " tok tok ... " with tok = D+ ":" [+-]? (D+ | D* "." D+) ([eE] [+-]? D+)?, D a digit.
# Between two consecutive non-digit bytes lie only digits, so checking each consecutive pair of
# non-digit bytes (with the number of digits between them: none, or at least one) checks the whole
# text. A sign is classed by the byte before it: after ":" (mantissa) or "e" (exponent), else
# invalid. The automaton accepts a subset of the grammar (not "5." nor "5.e3"): the slow path takes
# the rest.
_OTHER, _WS, _DIGIT, _COLON, _DOT, _EXP, _SIGN, _MSIGN, _ESIGN = range(9)
_CLASS = np.full(256, _OTHER, dtype=np.uint8)
_CLASS[[ord(" "), ord("\t")]] = _WS
_CLASS[ord("0") : ord("9") + 1] = _DIGIT
_CLASS[ord(":")] = _COLON
_CLASS[ord(".")] = _DOT
_CLASS[[ord("e"), ord("E")]] = _EXP
_CLASS[[ord("+"), ord("-")]] = _SIGN
_NEVER, _ANY, _GAP0, _GAP1 = range(4)  # digits between the pair: any, none, at least one
_RULE = np.full((9, 9), _NEVER, dtype=np.uint8)
_RULE[_WS, _WS] = _GAP0
_RULE[_WS, _COLON] = _GAP1
_RULE[_COLON, [_WS, _EXP]] = _GAP1
_RULE[_COLON, _DOT] = _ANY
_RULE[_COLON, _MSIGN] = _GAP0
_RULE[_MSIGN, _DOT] = _ANY
_RULE[_MSIGN, [_WS, _EXP]] = _GAP1
_RULE[_DOT, [_WS, _EXP]] = _GAP1
_RULE[_EXP, _ESIGN] = _GAP0
_RULE[_EXP, _WS] = _GAP1
_RULE[_ESIGN, _WS] = _GAP1
_RULE = _RULE.ravel()


def _parse_features_fast(
    feats: list[str], cap: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(rows, ids, values)`` of the feature parts ``feats`` of the lines, or None to decline."""
    # 19 spaces of padding keep every ``colon - k`` below in bounds (ids have at most 18 digits).
    text = " ".join([" " * 18, *feats, ""])
    if not text.isascii():
        return None
    buf = bytearray(text, "ascii")  # blanked in place below; few copies of a 10 MB text
    codes = np.frombuffer(buf, dtype=np.uint8)
    scratch = codes - np.uint8(ord("0"))
    nondigit = np.greater(scratch, 9, out=scratch.view(np.bool_))  # uint8 wraps below "0"
    pos = np.flatnonzero(nondigit)
    del scratch, nondigit
    kind = _CLASS[codes[pos]]
    prev = kind[:-1]
    sign = np.flatnonzero(kind[1:] == _SIGN)
    kind[sign + 1] = np.where(
        prev[sign] == _COLON, _MSIGN, np.where(prev[sign] == _EXP, _ESIGN, _OTHER)
    )
    step = np.diff(pos)  # 1 + the number of digits between consecutive non-digits
    rule = _RULE[kind[:-1] * np.uint8(9) + kind[1:]]
    ok = (rule == _ANY) | ((rule == _GAP0) & (step == 1)) | ((rule == _GAP1) & (step > 1))
    if not ok.all():
        return None
    at = np.flatnonzero(kind == _COLON)
    colons = pos[at]
    width = step[at - 1] - 1  # digits of the id
    longest = int(width.max()) if width.size else 0
    if longest > 18:  # beyond int64: surely out of range, let the slow path say so
        return None
    ids = np.zeros(colons.size, dtype=np.int64)
    codes[colons] = ord(" ")
    for k in range(1, longest + 1):
        has = width >= k
        digit = codes[colons - k].astype(np.int64) - ord("0")
        ids += np.where(has, digit, 0) * 10 ** (k - 1)
        codes[np.where(has, colons - k, colons)] = ord(" ")  # leaves the values alone
    if ids.size and (ids.min() < 1 or ids.max() > cap):
        return None
    try:
        values = np.fromstring(bytes(buf), dtype=np.float64, sep=" ")
    except ValueError:  # unreachable after the automaton; declining is always safe
        return None
    if values.size != ids.size or not np.isfinite(values).all():
        return None
    starts = np.cumsum([0] + [len(f) + 1 for f in feats[:-1]]) + 19
    rows = np.searchsorted(starts, colons, side="right") - 1
    return rows, ids, values
