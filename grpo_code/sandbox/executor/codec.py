"""One value encoding for everything that crosses a process boundary in the sandbox.

Values travel as JSON with tags, so Python's types survive the trip: ``list`` is a JSON
array, and every other container is a one-key object whose key names the type::

    {"$t": [...]} tuple      {"$s": [...]} set        {"$f": [...]} frozenset
    {"$d": [[k, v], ...]} dict (any hashable keys, insertion order kept)
    {"$b": "hex"} bytes      {"$y": "hex"} bytearray  {"$c": [re, im]} complex
    {"$i": "hex"} an int too large for a JSON number (no 4300-digit limit)
    {"$k": ["Counter", [[k, v], ...]]} collections.Counter, OrderedDict, defaultdict
        (with its factory when that is a builtin), deque; fractions.Fraction; decimal.Decimal;
        datetime's date, datetime and time (without a zone) and timedelta; range; dict views;
        a numpy array (script tests only; numpy's scalars travel as int and float, and
        sortedcontainers' lists and sets as lists and sets)
    {"$q": "int"} a builtin type (``int``, ``list``)
    {"$h": id, "t": "Name"} a handle: an object that stayed in the program's process
    {"$n": ["TreeNode", [[val, left, right], ...]]} LeetCode's nodes (``nodes.py``), between
        the judge and the program only

``None``, ``bool``, ``str`` and ``float`` (NaN and infinities included) are JSON as they are.

Builtin types and the standard library's value types above are encoded as values; so is
a subclass of a builtin type that does not change how it compares (a namedtuple, an
``IntEnum``), as its base type. Anything else (an instance of the program's own class, a
generator) becomes a handle when the caller keeps a handle table, and is refused
otherwise. Whatever a process claims a value is, the receiver builds it from its own
trusted types, so an encoding cannot smuggle behaviour across. Decoding is strict: an unknown tag, a wrong shape, an
unhashable set member or too deep a nesting raises :class:`CodecError`, so a process that
writes garbage on a channel gets a refusal, never a value it did not earn.

Standard library only (the executor, the program's process and the judge all import it).
"""

from __future__ import annotations

import builtins
import json

from . import nodes

_type = type
MAX_ITEMS = 2_000_000
"""Values with more items than this are refused (a documented limit, see docs/sandbox.md):
a returned value over it is the verdict ``output_limit``."""
MAX_DEPTH = 200
MAX_INT_HEX = 64 * 1024 * 1024
"""Hex digits of the largest integer decoded (hex parses in linear time; HumanEval/83's
answers run to hundreds of thousands of digits)."""
_BIG = 1 << 62


class CodecError(Exception):
    """A value cannot be encoded, or a message does not decode to one."""


class TooLarge(CodecError):
    """A value over :data:`MAX_ITEMS` items."""


def encode(value, handles=None) -> str:
    """JSON text of ``value``; ``handles`` (a :class:`HandleTable`) keeps what is not data."""
    return json.dumps(to_tree(value, handles), separators=(",", ":"), allow_nan=True)


def decode(text, make_handle=None):
    """The value of JSON text written by :func:`encode`; ``make_handle(hid, type_name)``
    builds handles (without it a handle is refused)."""
    try:
        tree = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CodecError(f"unreadable value ({type(exc).__name__})") from None
    return from_tree(tree, make_handle)


class HandleTable:
    """Objects the program's process keeps and the judge refers to by number."""

    def __init__(self):
        self.objects: dict[int, object] = {}
        self._ids: dict[int, int] = {}

    def add(self, obj) -> dict:
        hid = self._ids.get(id(obj))
        if hid is None:
            hid = len(self.objects) + 1
            self.objects[hid] = obj
            self._ids[id(obj)] = hid
        name = getattr(_type(obj), "__qualname__", "object")
        return {"$h": hid, "t": name if _type(name) is str else "object"}

    def get(self, hid):
        try:
            return self.objects[hid]
        except (KeyError, TypeError):
            raise CodecError(f"no handle {hid!r}") from None


def to_tree(value, handles=None, _depth=0, _budget=None):
    """``value`` as a JSON-ready tree (see the module docstring)."""
    if _budget is None:
        _budget = [MAX_ITEMS]
    _budget[0] -= 1
    if _budget[0] < 0:
        raise TooLarge(f"value too large: over the limit of {MAX_ITEMS} items (docs/sandbox.md, Values)")
    if _depth > MAX_DEPTH:
        raise CodecError(f"value nested deeper than {MAX_DEPTH} levels")
    t = _type(value)
    if value is None or t is bool or t is str or t is float:
        return value
    if t is int:
        return value if -_BIG < value < _BIG else {"$i": hex(value)}
    d = _depth + 1
    if t is list or t is tuple:
        flat = _flat(value, t, _budget)
        if flat is not None:
            return flat if t is list else {"$t": flat}
    if t is list:
        return [to_tree(v, handles, d, _budget) for v in list.__iter__(value)]
    if t is tuple:
        return {"$t": [to_tree(v, handles, d, _budget) for v in tuple.__iter__(value)]}
    if t is dict:
        return {"$d": [[to_tree(k, handles, d, _budget), to_tree(v, handles, d, _budget)]
                       for k, v in dict.items(value)]}
    if t is set or t is frozenset:
        items = [to_tree(v, handles, d, _budget) for v in t.__iter__(value)]
        return {"$s" if t is set else "$f": items}
    if t is bytes:
        return {"$b": bytes.hex(value)}
    if t is bytearray:
        return {"$y": bytearray.hex(value)}
    if t is complex:
        return {"$c": [complex.real.__get__(value), complex.imag.__get__(value)]}
    if _builtin_name(value) is not None:
        return {"$q": value.__name__}
    known = _library_value(value, t, handles, d, _budget)
    if known is not None:
        return known
    base = _as_base(value, t)
    if base is not None:
        return to_tree(base, handles, _depth, _budget)
    if handles is not None:
        kind = nodes.kind_of(value)
        if kind is not None:
            try:
                return nodes.encode(value, kind, lambda v: to_tree(v, handles, d, _budget), _budget)
            except OverflowError:
                raise TooLarge(f"value too large: over the limit of {MAX_ITEMS} items (docs/sandbox.md, Values)") from None
            except TypeError:
                pass  # not a node after all: a handle
        return handles.add(value)
    raise CodecError(f"a {_describe(t)} is not a plain value")


_FLAT = frozenset((str, float, bool, type(None)))


def _flat(value, t, budget) -> list | None:
    """A list or tuple of plain scalars (str, float, bool, None, ints below 2**62) as its
    tree, found at C speed (a HumanEval+ answer of a million numbers costs milliseconds,
    not a second); None when an item needs the general path."""
    items = list.__iter__(value) if t is list else tuple.__iter__(value)
    kinds = set(map(_type, items))
    if not kinds <= _FLAT | {int}:
        return None
    n = list.__len__(value) if t is list else tuple.__len__(value)
    if int in kinds:
        ints = value if kinds == {int} else [x for x in value if _type(x) is int]
        if ints and not (-_BIG < min(ints) and max(ints) < _BIG):
            return None
    budget[0] -= n
    if budget[0] < 0:
        raise TooLarge(f"value too large: over the limit of {MAX_ITEMS} items (docs/sandbox.md, Values)")
    return list(value)


def _describe(t) -> str:
    module = getattr(t, "__module__", "")
    name = getattr(t, "__qualname__", "object")
    return f"{module}.{name}" if module not in ("builtins", "") else str(name)


TAGS = ("$t", "$s", "$f", "$d", "$b", "$y", "$c", "$i", "$h", "$k", "$q", "$n")
NODE_CLASSES = None
"""Where a process decoding LeetCode nodes (``$n``) gets its classes: ``kind -> class`` (the
judge's trusted ones, or the program's namespace's); None refuses nodes."""
_BASES = (int, float, complex, str, bytes, bytearray, tuple, list, dict, set, frozenset)
_PLAIN = frozenset({type(None), bool, *_BASES})
_LIBRARY_MODULES = frozenset({"collections", "fractions", "decimal", "datetime"})
_SAME_COMPARISON = ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__contains__")


def may_be_value(value) -> bool:
    """False for what :func:`to_tree` certainly keeps as a handle (a quick test, no raise)."""
    t = _type(value)
    if t in _PLAIN or isinstance(value, _BASES) or getattr(t, "__module__", None) in _LIBRARY_MODULES:
        return True
    return isinstance(value, type) and _builtin_name(value) is not None


def _builtin_name(value):
    """The name of a builtin type (functions are not values: ``eval`` must not arrive as one)."""
    if not isinstance(value, type):
        return None
    name = value.__name__
    if _type(name) is str and getattr(builtins, name, None) is value and not name.startswith("_"):
        return name
    return None


def _library_value(value, t, handles, d, budget):
    """Standard-library value types, by the name of their class (see the module docstring)."""
    module, name = getattr(t, "__module__", None), getattr(t, "__qualname__", None)
    if module == "collections" and isinstance(value, dict) and name in ("Counter", "OrderedDict", "defaultdict"):
        pairs = [[to_tree(k, handles, d, budget), to_tree(v, handles, d, budget)] for k, v in dict.items(value)]
        if name == "defaultdict":
            return {"$k": [name, pairs, _builtin_name(value.default_factory)]}
        return {"$k": [name, pairs]}
    if module == "collections" and name == "deque":
        return {"$k": [name, [to_tree(v, handles, d, budget) for v in list(value)], value.maxlen]}
    if module == "fractions" and name == "Fraction":
        return {"$k": [name, to_tree(int(value.numerator)), to_tree(int(value.denominator))]}
    if module == "decimal" and name == "Decimal":
        return {"$k": [name, str(value)]}
    if module == "datetime" and name in ("date", "datetime", "time") and getattr(value, "tzinfo", None) is None:
        return {"$k": [name, value.isoformat()]}
    if module == "datetime" and name == "timedelta":
        return {"$k": [name, [value.days, value.seconds, value.microseconds]]}
    if t is range:
        return {"$k": ["range", [to_tree(value.start), to_tree(value.stop), to_tree(value.step)]]}
    if module == "builtins" and name in ("dict_keys", "dict_values", "dict_items"):
        items = [to_tree(v, handles, d, budget) for v in value]
        return {"$k": [name, items]}
    if _type(module) is str and module.split(".")[0] == "sortedcontainers" and name in ("SortedList", "SortedKeyList",
                                                                                         "SortedSet"):
        items = [to_tree(v, handles, d, budget) for v in value]
        return items if name != "SortedSet" else {"$s": items}
    if module == "numpy" and callable(getattr(value, "item", None)) and getattr(value, "shape", None) == ():
        plain = value.item()  # a numpy scalar (np.int64, np.float64): as Python's int or float
        return to_tree(plain, handles, d, budget) if _type(plain) in _PLAIN else None
    if module == "numpy" and name == "ndarray" and handles is not None:
        dtype = str(value.dtype)
        if not _NUMPY_DTYPE(dtype):
            return None
        return {"$k": ["ndarray", dtype, to_tree(value.tolist(), handles, d, budget)]}
    return None


def _NUMPY_DTYPE(dtype: str) -> bool:
    """A numpy dtype sent as values: booleans, numbers, fixed-width text."""
    import re

    return re.fullmatch(r"bool|u?int(8|16|32|64)|float(16|32|64)|complex(64|128)|[<>|]?[US]\d{1,6}", dtype) is not None


def _as_base(value, t):
    """A subclass of a builtin type that compares as its base does, as that base."""
    for base in _BASES:
        if isinstance(value, base):
            if all(getattr(t, m, None) is getattr(base, m, None) for m in _SAME_COMPARISON):
                return base(value)
            return None
    return None


def _from_library(body, make_handle, d, plain=False):
    if _type(body) is not list or not body or _type(body[0]) is not str:
        raise CodecError("malformed value")
    name = body[0]
    import collections

    if name in ("Counter", "OrderedDict", "defaultdict") and len(body) == (3 if name == "defaultdict" else 2):
        pairs = from_tree({"$d": body[1]}, make_handle, d, plain)
        if name == "defaultdict":
            factory = None if body[2] is None else _builtin(body[2])
            return collections.defaultdict(factory, pairs)
        return getattr(collections, name)(pairs)
    if name == "deque" and len(body) == 3 and (body[2] is None or _type(body[2]) is int):
        return collections.deque(from_tree(body[1], make_handle, d, plain), body[2])
    if name == "Fraction" and len(body) == 3:
        import fractions

        num, den = from_tree(body[1]), from_tree(body[2])
        if _type(num) is not int or _type(den) is not int or den == 0:
            raise CodecError("malformed Fraction")
        return fractions.Fraction(num, den)
    if name in ("date", "datetime", "time") and len(body) == 2 and _type(body[1]) is str and len(body[1]) < 64:
        import datetime

        try:
            return getattr(datetime, name).fromisoformat(body[1])
        except ValueError:
            raise CodecError(f"malformed {name}") from None
    if name == "timedelta" and len(body) == 2 and _type(body[1]) is list and len(body[1]) == 3 \
            and all(_type(x) is int for x in body[1]):
        import datetime

        try:
            return datetime.timedelta(days=body[1][0], seconds=body[1][1], microseconds=body[1][2])
        except OverflowError:
            raise CodecError("malformed timedelta") from None
    if name == "range" and len(body) == 2 and _type(body[1]) is list and len(body[1]) == 3:
        bounds = [from_tree(x) for x in body[1]]
        if not all(_type(x) is int for x in bounds) or bounds[2] == 0:
            raise CodecError("malformed range")
        return range(*bounds)
    if name in ("dict_keys", "dict_values", "dict_items") and len(body) == 2:
        items = from_tree(body[1], make_handle, d, plain)
        if _type(items) is not list:
            raise CodecError("malformed view")
        if name == "dict_values":
            return {i: v for i, v in enumerate(items)}.values()
        if name == "dict_keys":
            return dict.fromkeys(items).keys()
        if not all(_type(p) is tuple and len(p) == 2 for p in items):
            raise CodecError("malformed view")
        return dict(items).items()
    if name == "ndarray" and len(body) == 3 and _type(body[1]) is str and _NUMPY_DTYPE(body[1]):
        try:
            import numpy
        except ImportError:
            raise CodecError("a numpy array, and numpy is not installed here") from None
        try:
            return numpy.array(from_tree(body[2], make_handle, d, plain), dtype=body[1])
        except (ValueError, TypeError, OverflowError):
            raise CodecError("malformed ndarray") from None
    if name == "Decimal" and len(body) == 2 and _type(body[1]) is str and len(body[1]) < 10000:
        import decimal

        try:
            return decimal.Decimal(body[1])
        except (ArithmeticError, ValueError):
            raise CodecError("malformed Decimal") from None
    raise CodecError("malformed value")


def _builtin(name):
    value = getattr(builtins, name, None) if _type(name) is str and not name.startswith("_") else None
    if not isinstance(value, type):
        raise CodecError(f"{name!r} is not a builtin")
    return value


def from_tree(tree, make_handle=None, _depth=0, plain_objects=False):
    """The value of a tree made by :func:`to_tree`; strict about shapes.

    ``plain_objects``: the form suites write (docs/sandbox.md, Values): a JSON object that is
    not one tag is a dict with string keys, so plain JSON data reads as itself."""
    if _depth > MAX_DEPTH + 1:
        raise CodecError("value nested too deeply")
    t = _type(tree)
    if tree is None or t is bool or t is str or t is float or t is int:
        return tree
    d = _depth + 1
    if plain_objects:
        if t is list:
            return [from_tree(v, None, d, True) for v in tree]
        if t is dict and not (len(tree) == 1 and next(iter(tree)) in TAGS and next(iter(tree)) not in ("$h", "$n")):
            return {k: from_tree(v, None, d, True) for k, v in tree.items()}
        return _tagged(tree, None, d, True)
    if t is list:
        return [from_tree(v, make_handle, d) for v in tree]
    if t is not dict or len(tree) not in (1, 2):
        raise CodecError("malformed value")
    return _tagged(tree, make_handle, d, False)


def _tagged(tree, make_handle, d, plain):
    tag = next(iter(tree))
    body = tree[tag]
    if tag == "$h":
        if make_handle is None or _type(body) is not int or _type(tree.get("t")) is not str:
            raise CodecError("unexpected handle")
        return make_handle(body, tree["t"])
    if len(tree) != 1 or tag not in TAGS:
        raise CodecError("malformed value")
    try:
        if tag == "$t":
            return tuple(from_tree(v, make_handle, d, plain) for v in _list(body))
        if tag == "$s":
            return {from_tree(v, make_handle, d, plain) for v in _list(body)}
        if tag == "$f":
            return frozenset(from_tree(v, make_handle, d, plain) for v in _list(body))
        if tag == "$d":
            out = {}
            for pair in _list(body):
                if _type(pair) is not list or len(pair) != 2:
                    raise CodecError("malformed dict item")
                out[from_tree(pair[0], make_handle, d, plain)] = from_tree(pair[1], make_handle, d, plain)
            return out
        if tag == "$b":
            return bytes.fromhex(_str(body))
        if tag == "$y":
            return bytearray.fromhex(_str(body))
        if tag == "$k":
            return _from_library(body, make_handle, d, plain)
        if tag == "$q":
            return _builtin(body)
        if tag == "$n":
            if NODE_CLASSES is None:
                raise CodecError("unexpected node")
            return nodes.decode(body, lambda v: from_tree(v, make_handle, d, plain), NODE_CLASSES)
        if tag == "$c":
            parts = _list(body)
            if len(parts) != 2 or any(_type(p) not in (int, float) for p in parts):
                raise CodecError("malformed complex")
            return complex(parts[0], parts[1])
        text = _str(body)
        if len(text) > MAX_INT_HEX:
            raise TooLarge(f"integer of more than {MAX_INT_HEX} hex digits")
        return int(text, 16)
    except TypeError:
        raise CodecError("unhashable item in a set or dict key") from None
    except CodecError:
        raise
    except (ValueError, ArithmeticError):  # OverflowError of complex(), Decimal's InvalidOperation
        raise CodecError("malformed value") from None


def _list(body) -> list:
    if _type(body) is not list:
        raise CodecError("malformed value")
    return body


def _str(body) -> str:
    if _type(body) is not str:
        raise CodecError("malformed value")
    return body
