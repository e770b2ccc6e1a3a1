"""What a pytest-style test module takes from pytest, for the judge (KodCode's tasks).

This file is *source text* for the judge, not a module the package imports: the kodcode
adapter puts it in each task's ``helpers`` (:data:`grpo_code.tasks.kodcode.PYTEST_HELPERS`),
and the judge runs it in a namespace of its own whose builtins are the judge's, then binds
``pytest``, ``_run_test`` and ``_from_solution`` into the test's namespace. So a program's
``max`` or ``isinstance``, imported by the test (``from solution import max``), never runs
inside ``approx`` or ``raises``. The test's own namespace is reached through the functions
it hands over (``fn.__globals__``): its fixtures, the program's names (``__program__``),
the capture of the program's output (``__capture__``) and the program's exception classes
(``__exception_classes__``). Standard library only; no names from the test are trusted.
"""

import io
import re
import sys
import types

_TEST_FILE = "<test>"  # what the judge compiles the test code as: fixtures are functions from there


class Failed(BaseException):
    """``pytest.fail`` and "DID NOT RAISE": as pytest's own outcome, a ``BaseException``, so a
    test's (or a program's) ``except Exception`` cannot swallow it."""


class _Raises:
    """``pytest.raises``; what ``with ... as excinfo`` gives has pytest's ``value``, ``type``,
    ``typename``, ``tb``, ``match()`` and ``errisinstance()``."""

    def __init__(self, expected, match=None):
        self.expected, self._pattern, self.value, self.type, self.typename, self.tb = (
            expected, match, None, None, None, None)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is None:
            raise Failed(f"DID NOT RAISE {self.expected}")
        if not _raised_as(kind, value, self.expected):
            return False
        if self._pattern is not None and not re.search(self._pattern, str(value)):
            raise AssertionError(f"Regex pattern did not match: {self._pattern!r} against {str(value)!r}")
        seen = getattr(kind, "seen_as", None)  # a program's exception: the class the test knows it by
        self.value, self.tb = value, tb
        self.type = seen if isinstance(seen, type) else kind
        self.typename = self.type.__name__
        return True

    def match(self, pattern):
        if not re.search(pattern, str(self.value)):
            raise AssertionError(f"Regex pattern did not match: {pattern!r} against {str(self.value)!r}")
        return True

    def errisinstance(self, exc):
        return isinstance(self.value, exc)


def _raised_as(kind, value, expected):
    """Whether the exception is one ``expected`` names: a class (a builtin, or a program's
    exception class the judge made a class of), or a tuple of them. A stand-in of a program's
    class that is not an exception class matches by the names of the classes it derives from."""
    if isinstance(expected, tuple):
        return any(_raised_as(kind, value, e) for e in expected)
    if isinstance(expected, type):
        return issubclass(kind, expected)
    own = getattr(value, "program_classes", ())
    try:
        wanted = str(expected)  # the program's class, as it writes itself: <class 'module.Name'>
    except Exception:
        return False
    return isinstance(wanted, str) and any(
        isinstance(name, str) and name and (wanted == f"<class '{name}'>" or wanted.endswith(f".{name}'>"))
        for name in own)


class _Approx:
    def __init__(self, expected, rel=None, abs=None):
        self.expected, self.rel, self.abs = expected, 1e-6 if rel is None else rel, 1e-12 if abs is None else abs

    def _close(self, a, b):
        if isinstance(b, (list, tuple)):
            return isinstance(a, (list, tuple)) and len(a) == len(b) and all(self._close(x, y) for x, y in zip(a, b))
        if isinstance(b, dict):
            return isinstance(a, dict) and a.keys() == b.keys() and all(self._close(a[k], b[k]) for k in b)
        if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float, complex)):
            return a == b
        if b != b or abs(b) == float("inf"):  # as pytest: NaN equals nothing, an infinity only itself
            return a == b
        return a == b or abs(a - b) <= max(self.rel * abs(b), self.abs)

    def __eq__(self, other):
        return self._close(other, self.expected)

    def __repr__(self):
        return f"approx({self.expected!r})"


class _Marks:
    def parametrize(self, names, values, **kwargs):
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)

        def mark(fn):
            sets = [dict(zip(names, v if len(names) > 1 else (v,))) for v in values]
            fn.__dict__.setdefault("_parameter_sets", []).append(sets)
            return fn
        return mark

    def __getattr__(self, name):
        return lambda *args, **kwargs: (args[0] if len(args) == 1 and callable(args[0]) and not kwargs
                                        else (lambda fn: fn))


class pytest:
    mark = _Marks()

    @staticmethod
    def raises(expected, *args, match=None, **kwargs):
        if args:
            with _Raises(expected, match):
                args[0](*args[1:], **kwargs)
            return None
        return _Raises(expected, match)

    @staticmethod
    def approx(expected, rel=None, abs=None):
        return _Approx(expected, rel, abs)

    @staticmethod
    def fail(reason=""):
        raise Failed(reason)

    @staticmethod
    def fixture(fn=None, *, scope="function", autouse=False, name=None, **kwargs):
        """A fixture of the module's (made again for each test: each runs in a process of its own)."""
        def mark(f):
            f._fixture_name = name or f.__name__
            f._fixture_autouse = autouse
            return f
        return mark(fn) if callable(fn) else mark


def _from_solution(into, names, declared=()):
    """``from solution import ...`` as pytest runs it: the names are the program's, builtins'
    names included (a program's ``sum`` shadows the builtin). ``names`` maps each bound name
    to the program's; None is a star import, which binds the builtins' names only where the
    task declares them (its ``test_info``; the others are bound already): an undeclared
    ``sorted`` of the program never judges its own answers. The program's exception classes
    are bound as the judge's classes for them, so ``except`` and ``raises`` take them."""
    program = into["__program__"]
    exceptions = into["__exception_classes__"]()
    if names is None:  # as ``import *``: public names only, and never one the test or its helpers bound
        for name in declared:
            if name in program and not name.startswith("_"):
                into[name] = program[name]
        for name, cls in exceptions.items():
            if not name.startswith("_") and name in program and into.get(name) is program[name]:
                into[name] = cls
        return
    for alias, name in names.items():
        if name not in program:
            raise ImportError(f"cannot import name {name!r} from 'solution'")
        into[alias] = exceptions.get(name, program[name])


class _CaptureResult(tuple):
    out = property(lambda self: self[0])
    err = property(lambda self: self[1])


class _CapSys:
    """``capsys``/``capfd``: what was printed through ``sys.stdout``/``sys.stderr`` during the
    test, by the program (read from its process) and by the test itself (the program's
    first: the two processes' order cannot be told)."""

    def __init__(self, capture):
        self._capture = capture
        self._saved = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = io.StringIO(), io.StringIO()

    def readouterr(self):
        out, err = self._capture("read")
        own = (sys.stdout.getvalue(), sys.stderr.getvalue())
        sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
        return _CaptureResult((out + own[0], err + own[1]))

    def close(self):
        sys.stdout, sys.stderr = self._saved

    def disabled(self):
        raise Failed("capsys.disabled() is not supported without pytest")


def _capsys(scope):
    capture = scope["__capture__"]
    capture("start")
    captured = _CapSys(capture)
    try:
        yield captured
    finally:
        captured.close()
        capture("stop")


_GIVEN = {"capsys": _capsys, "capfd": _capsys}


def _test_functions(scope):
    """The functions the test code defined (never an object of the program's)."""
    return [f for f in list(scope.values())
            if type(f) is types.FunctionType and f.__code__.co_filename == _TEST_FILE]


def _fixture(name, scope, made, teardowns, chain=()):
    """The value of fixture ``name`` for one test: the module's ``@pytest.fixture`` of that
    name (its own fixtures first), or one pytest gives (``capsys``)."""
    if name in made:
        return made[name]
    if name in chain:
        raise Failed(f"fixtures depend on each other in a cycle: {' -> '.join(chain + (name,))}")
    fn = next((f for f in _test_functions(scope) if f.__dict__.get("_fixture_name") == name), None)
    if fn is None:
        given = _GIVEN.get(name)
        if given is None:
            raise Failed(f"fixture {name!r} not found (only the module's own and capsys are given)")
        value = given(scope)
    else:
        code = fn.__code__
        value = fn(**{a: _fixture(a, scope, made, teardowns, chain + (name,))
                      for a in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]})
    if isinstance(value, types.GeneratorType):  # a yield fixture: its teardown after the test
        generator, value = value, next(value)
        teardowns.append(lambda: next(generator, None))
    made[name] = value
    return value


def _run_test(fn):
    """Run one test function as pytest would: each parameter set, its fixtures, teardowns."""
    scope = fn.__globals__
    runs = [{}]
    for sets in fn.__dict__.get("_parameter_sets", []):
        runs = [{**done, **more} for done in runs for more in sets]
    code = fn.__code__
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    autouse = [f.__dict__["_fixture_name"] for f in _test_functions(scope) if f.__dict__.get("_fixture_autouse")]
    for kwargs in runs:
        made, teardowns = dict(kwargs), []
        try:
            for name in autouse:
                _fixture(name, scope, made, teardowns)
            fn(**{name: _fixture(name, scope, made, teardowns) for name in names})
        finally:
            for teardown in reversed(teardowns):
                teardown()
