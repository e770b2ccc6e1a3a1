"""The program's exceptions as the judge raises them into the test (``judge.py``).

A script test calls the program's functions through the judge; an exception the program
raised comes back as its nearest builtin class's name, its message and traceback, and is
raised in the test as an instance of a class that is both that builtin (so the test's
``except ValueError`` catches it, as in one process) and :class:`ProgramException` (so the
judge tells it from the test's own failures). Standard library only.
"""

from __future__ import annotations

import builtins

_type = type


class ProgramException(Exception):
    """Mixed into exceptions the program raised, so the judge can tell them from the test's own."""

    program_traceback = ""
    program_type = ""
    program_classes: tuple = ()  # the qualified names of the program's classes it derives from
    program_object = None  # the exception in the program's process (a ProgramObject), when it was kept
    program_message = ""
    program_base = "Exception"  # the builtin class it stands for
    seen_as: type | None = None  # the class a test names it by (``excinfo.type``): the builtin, or the program's

    def __getattr__(self, name: str):
        """Attributes the program's exception has and the judge's stand-in lacks
        (``excinfo.value.field``), read from the program's object."""
        held = self.__dict__.get("program_object")
        if held is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(held, name)


_FORWARDED = ("args", "code", "errno", "strerror", "filename", "filename2", "msg", "lineno", "offset", "text",
              "path", "value")
"""Attributes of builtin exceptions (``args``; ``SystemExit.code``, ``OSError.errno``...) that
the judge reads from the program's exception object when it was kept."""


def _forwarded(name: str):
    native = [(cls, cls.__dict__[name]) for cls in (BaseException, SystemExit, OSError, UnicodeError, SyntaxError,
                                                  ImportError, StopIteration) if name in cls.__dict__]

    def get(self):
        held = self.__dict__.get("program_object")
        if held is not None:
            return getattr(held, name)
        for cls, descriptor in native:
            if isinstance(self, cls):
                return descriptor.__get__(self, _type(self))
        raise AttributeError(name)

    return property(get)


def _str(self) -> str:
    """What the program's ``str()`` of its exception said (a ``KeyError`` is not quoted twice)."""
    return self.__dict__.get("program_message", "")


RAISED_TYPES: dict = {}


def program_exception(info) -> BaseException:
    """The exception to raise in the test for a program's ``{"type", "name", "message",
    "tb"}``; ``ValueError`` when ``info`` is not of that shape."""
    if _type(info) is not dict:
        raise ValueError("malformed exception")
    name, message = info.get("type"), info.get("message")
    if _type(name) is not str or _type(message) is not str:
        raise ValueError("malformed exception")
    base = getattr(builtins, name, None)
    if not (isinstance(base, type) and issubclass(base, BaseException)):
        base = Exception
    if issubclass(base, (StopIteration, StopAsyncIteration)):
        # Raised into map(), all() or a for loop of the test it would end the iteration
        # quietly (a test that checks nothing passes): a RuntimeError, as PEP 479 does.
        base, message = RuntimeError, f"the program raised {name}: {message}"
    mro = info.get("mro")
    classes = tuple(str(n)[:200] for n in mro[:32]) if _type(mro) is list else ()
    try:
        exc = (_raised_program(classes, base) if classes else raised_class(base))(message)
    except BaseException:
        exc = raised_class(Exception)(message)
    exc.program_message = message
    exc.program_traceback = str(info.get("tb") or "")[-2000:]
    exc.program_type = str(info.get("name") or name)[:200]
    exc.program_classes = classes or (exc.program_type,)
    return exc


PROGRAM_CLASSES: dict = {}
RAISED_PROGRAM: dict = {}


def program_class(names: tuple) -> type:
    """The judge's class for a program's exception class, by the qualified names of the
    program's classes it derives from (itself first): one class per chain, derived from its
    parent's, so a test's ``except InvalidAge`` (the test binds the program's ``InvalidAge``
    to this class) catches the program's ``InvalidAge`` and its subclasses."""
    if not names:
        return ProgramException
    cls = PROGRAM_CLASSES.get(names)
    if cls is None:
        if len(PROGRAM_CLASSES) > 4096:
            PROGRAM_CLASSES.clear()
            RAISED_PROGRAM.clear()
        parent = program_class(names[1:])
        cls = type(names[0].rpartition(".")[2] or "ProgramError", (parent,),
                   {"__module__": "solution", "__qualname__": names[0]})
        PROGRAM_CLASSES[names] = cls
    return cls


def _raised_program(names: tuple, base: type) -> type:
    """The class of an exception the program raised: its program class (above) and the judge's
    class for its nearest builtin (``except ValueError`` catches it too)."""
    key = (names, base)
    cls = RAISED_PROGRAM.get(key)
    if cls is None:
        try:
            cls = type(names[0].rpartition(".")[2] or "ProgramError", (program_class(names), raised_class(base)),
                       {"__module__": "solution", "__qualname__": names[0], "seen_as": program_class(names)})
        except TypeError:
            cls = raised_class(base)
        RAISED_PROGRAM[key] = cls
    return cls


def raised_class(base: type) -> type:
    """The judge's class for a program's ``base`` exception: a ``base`` (the test's ``except``
    catches it) and a :class:`ProgramException`. For ``Exception``, ``ProgramException`` alone:
    ``(Exception, ProgramException)`` has no method order, and building it raised a ``TypeError``
    inside the test (which its ``except TypeError`` caught)."""
    cls = RAISED_TYPES.get(base)
    if cls is None:
        bases = (ProgramException,) if base is Exception else (base, ProgramException)
        try:
            cls = type(base.__name__, bases, {"__module__": "builtins", "program_base": base.__name__, "__str__": _str,
                                              "seen_as": base,
                                              **{name: _forwarded(name) for name in _FORWARDED}})
        except TypeError:  # a builtin whose layout takes no second base
            cls = raised_class(Exception)
        RAISED_TYPES[base] = cls
    return cls


def builtin_base(t: type) -> str:
    """The nearest builtin exception class of ``t`` (a program's ``class Invalid(ValueError)``
    is a ``ValueError`` to the test's ``except``), ``Exception`` when none can be told."""
    try:
        for k in t.__mro__:
            # By identity: a program's class that calls itself builtins.ValueError is not one.
            name = type.__getattribute__(k, "__name__")
            if _type(name) is str and getattr(builtins, name, None) is k and issubclass(k, BaseException):
                return name
    except BaseException:
        pass
    return "Exception"
