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
    program_base = "Exception"  # the builtin class it stands for


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
    try:
        exc = raised_class(base)(message)
    except BaseException:
        exc = raised_class(Exception)(message)
    exc.program_traceback = str(info.get("tb") or "")[-2000:]
    exc.program_type = str(info.get("name") or name)[:200]
    mro = info.get("mro")
    exc.program_classes = tuple(str(n)[:200] for n in mro[:32]) if _type(mro) is list else (exc.program_type,)
    return exc


def raised_class(base: type) -> type:
    """The judge's class for a program's ``base`` exception: a ``base`` (the test's ``except``
    catches it) and a :class:`ProgramException`. For ``Exception``, ``ProgramException`` alone:
    ``(Exception, ProgramException)`` has no method order, and building it raised a ``TypeError``
    inside the test (which its ``except TypeError`` caught)."""
    cls = RAISED_TYPES.get(base)
    if cls is None:
        bases = (ProgramException,) if base is Exception else (base, ProgramException)
        try:
            cls = type(base.__name__, bases, {"__module__": "builtins", "program_base": base.__name__})
        except TypeError:  # a builtin whose layout takes no second base
            cls = raised_class(Exception)
        RAISED_TYPES[base] = cls
    return cls
