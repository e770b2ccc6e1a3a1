"""The program's end of a Python ``script`` test's channel to the judge (``judge.py``).

Once the program's module has run, its process answers the judge's requests over the
channel (fd 4): the *manifest* of its names first, then calls, attribute reads, iteration
and comparisons of its objects, each answered with a value (``codec.py``) or the exception it
raised. Objects that are not values stay here as handles. A test function the judge
passes (a callback, a function a decorator of the program's wraps) arrives as a
:class:`_TestFunction`: calling it asks the judge to run it, while this process goes on
answering the judge's nested requests. Standard library only.
"""

from __future__ import annotations

import builtins
import os
import sys
import traceback

from . import codec, nodes, protocol
from .raised import builtin_base

_type = type
_ModuleType = type(builtins)
CHANNEL_FD = 4  # pychild.CHANNEL_FD: where the zygote places the channel


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:
            pass


def tail(limit: int = 2000, skip: str = __file__) -> str:
    """The current exception's traceback without this harness's frames."""
    etype, value, tb = sys.exc_info()
    here = os.path.dirname(os.path.abspath(skip))
    frames = [f for f in traceback.extract_tb(tb) if os.path.dirname(os.path.abspath(f.filename)) != here]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)]
    lines += traceback.format_exception_only(etype, value)
    return "".join(lines)[-limit:]


def _manifest(namespace: dict, handles: codec.HandleTable) -> dict:
    """What the test code may take from the program: values, modules, and names (called
    through the channel)."""
    out = {}
    for name, value in list(namespace.items()):
        if name.startswith("__") and name.endswith("__"):
            continue
        t = _type(value)
        if t is _ModuleType and _type(getattr(value, "__name__", None)) is str:
            out[name] = {"m": value.__name__}
            continue
        if not codec.may_be_value(value):  # functions, classes, typing's List: without raising
            out[name] = {"v": handles.add(value)}
            continue
        try:
            out[name] = {"v": codec.to_tree(value, None, 0, [10000])}
        except codec.CodecError:
            out[name] = {"v": handles.add(value)}
    return out


def _exception(exc: BaseException, handles: codec.HandleTable | None = None) -> dict:
    t = _type(exc)
    try:
        message = str(exc)[:2000]
    except BaseException:
        message = "(the exception could not be shown)"
    report = {"type": builtin_base(t), "name": str(t.__qualname__)[:200], "message": message,
              "tb": tail(), "mro": _own_classes(t)}
    if handles is not None:  # the exception object itself, for attributes the test reads (excinfo.value.code)
        report["object"] = handles.add(exc)
    return {"raise": report}


def _own_classes(t: type) -> list:
    """The qualified names of the program's classes ``t`` derives from, itself first (a test's
    ``pytest.raises(BaseError)`` takes the program's ``DerivedError``)."""
    out = []
    try:
        for k in t.__mro__[:32]:
            name = type.__getattribute__(k, "__qualname__")
            if getattr(builtins, str(name), None) is k or k is object:
                continue
            if _type(name) is str:
                out.append(name[:200])
    except BaseException:
        pass
    return out


def _exception_classes(namespace: dict) -> dict:
    """The program's exception classes by the module-level names bound to them: the names of
    the program's classes each derives from, and its nearest builtin."""
    out = {}
    for name, value in list(namespace.items()):
        if (isinstance(value, type) and issubclass(value, BaseException) and not name.startswith("__")
                and getattr(builtins, _type.__getattribute__(value, "__name__"), None) is not value):
            out[name] = [_own_classes(value), builtin_base(value)]
    return out


def _node_classes(namespace: dict):
    """The program's ``TreeNode``/``ListNode`` for LeetCode nodes the judge sends (the
    prelude's when the program defines none)."""
    def classes(kind: str):
        own = namespace.get(kind)
        return own if isinstance(own, type) else nodes.CLASSES[kind]
    return classes


class _JudgeGone(BaseException):
    """The judge closed the channel (the test is over) while the program called back."""


class _TestFunction:
    """A function of the test the program was passed (a callback, a function its decorator
    wraps): calling it asks the judge to run it, serving the judge's own requests meanwhile."""

    __slots__ = ("_link", "_number")

    def __init__(self, link, number: int):
        self._link, self._number = link, number

    def __call__(self, *args, **kwargs):
        link = self._link
        protocol.send_json(link.channel, {"cb": {"ref": self._number,
                                                 "args": [codec.to_tree(a, link.handles) for a in args],
                                                 "kwargs": {str(k): codec.to_tree(v, link.handles)
                                                            for k, v in kwargs.items()}}})
        while True:
            msg = link.receive()
            if _type(msg) is dict and "op" in msg:
                link.answer(msg)
                continue
            if _type(msg) is dict and "ok" in msg:
                return link.arg(msg["ok"])
            raised = msg.get("raise") if _type(msg) is dict else None
            name = raised.get("type") if _type(raised) is dict else None
            cls = getattr(builtins, name, None) if _type(name) is str else None
            if not (isinstance(cls, type) and issubclass(cls, BaseException)):
                cls = Exception
            raise cls(str(raised.get("message", "")) if _type(raised) is dict else "the test function failed")


class _Handles(codec.HandleTable):
    def add(self, obj) -> dict:
        if _type(obj) is _TestFunction:
            return {"$h": -obj._number, "t": "test"}
        return super().add(obj)


class _JudgeLink:
    """The program's end of the judge's channel: its handles and how it answers."""

    def __init__(self, namespace: dict, channel: int):
        self.namespace = namespace
        self.channel = channel
        self.handles = _Handles()
        self.reader = protocol.FrameReader(channel)
        self.tests: dict = {}

    def resolve(self, ref):
        return self.handles.get(ref)

    def _handle(self, hid, _type_name):
        if _type(hid) is int and hid < 0:
            fn = self.tests.get(-hid)
            if fn is None:
                fn = self.tests[-hid] = _TestFunction(self, -hid)
            return fn
        return self.handles.get(hid)

    def arg(self, tree):
        return codec.from_tree(tree, self._handle)

    def receive(self):
        try:
            return protocol.recv_json(self.reader)
        except (protocol.ChannelClosed, protocol.FrameError):
            raise _JudgeGone() from None

    def answer(self, msg) -> None:
        try:
            if _type(msg) is dict and msg.get("op") == "exceptions":
                reply = {"ok": codec.to_tree(_exception_classes(self.namespace))}
            else:
                reply = _answer(msg, self.resolve, self.arg, self.handles)
        except _JudgeGone:
            raise
        except MemoryError:
            reply = {"raise": {"type": "MemoryError", "name": "MemoryError", "message": "", "tb": ""}}
        except BaseException as exc:
            reply = _exception(exc, self.handles)
        _flush()
        try:
            protocol.send_json(self.channel, reply)
        except protocol.ChannelClosed:
            raise _JudgeGone() from None
        except (ValueError, TypeError) as exc:  # json could not write it
            protocol.send_json(self.channel, _exception(exc))


def serve(namespace: dict, channel: int = CHANNEL_FD) -> int:
    """Answer the judge until it closes the channel (the test is over); 0."""
    codec.NODE_CLASSES = _node_classes(namespace)
    link = _JudgeLink(namespace, channel)
    protocol.send_json(channel, {"ready": _manifest(namespace, link.handles)})
    try:
        while True:
            link.answer(link.receive())
    except _JudgeGone:
        return 0


class _Captured:
    """What the program prints while a test captures it (pytest's ``capsys``)."""

    saved: tuple | None = None


def _capture(action) -> dict:
    import io

    if action == "start" and _Captured.saved is None:
        _flush()
        _Captured.saved = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
        return {"ok": None}
    if action == "read" and _Captured.saved is not None:
        out, err = sys.stdout, sys.stderr
        values = [out.getvalue() if isinstance(out, io.StringIO) else "",
                  err.getvalue() if isinstance(err, io.StringIO) else ""]
        sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
        return {"ok": codec.to_tree(values)}
    if action == "stop" and _Captured.saved is not None:
        sys.stdout, sys.stderr = _Captured.saved
        _Captured.saved = None
        return {"ok": None}
    raise ValueError(f"capture {action!r} out of order")


def _answer(msg: dict, resolve, arg, handles) -> dict:
    op = msg["op"]
    if op == "capture":
        return _capture(msg.get("action"))
    target = resolve(msg["ref"])
    if op == "call":
        args = [arg(a) for a in msg["args"]]
        kwargs = {k: arg(v) for k, v in msg["kwargs"].items()}
        value = target(*args, **kwargs)
        mutated = {}
        for i, (sent, now) in enumerate(zip(msg["args"], args)):
            if _type(now) in (list, dict, set, bytearray) or nodes.kind_of(now):
                tree = codec.to_tree(now, handles)
                if tree != sent:
                    mutated[str(i)] = tree
        for k, now in kwargs.items():
            if _type(now) in (list, dict, set, bytearray) or nodes.kind_of(now):
                tree = codec.to_tree(now, handles)
                if tree != msg["kwargs"][k]:
                    mutated[k] = tree
        return {"ok": codec.to_tree(value, handles), "mut": mutated}
    if op == "getattr":
        return {"ok": codec.to_tree(getattr(target, msg["attr"]), handles)}
    if op == "setattr":
        setattr(target, msg["attr"], arg(msg["value"]))
        return {"ok": None}
    if op == "iter":
        if iter(target) is target:  # an iterator (a generator): the judge asks for its items one by one
            return {"ok": None}
        return {"ok": codec.to_tree(list(target), handles)}
    if op == "next":
        try:
            return {"ok": [codec.to_tree(next(target), handles)]}
        except StopIteration:
            return {"ok": []}
    if op == "getitem":
        return {"ok": codec.to_tree(target[arg(msg["key"])], handles)}
    if op == "eq":
        return {"ok": bool(target == resolve(msg["other"]))}
    if op == "isinstance":
        return {"ok": isinstance(target, resolve(msg["other"])) is True}
    if op == "issubclass":
        return {"ok": isinstance(target, type) and issubclass(target, resolve(msg["other"])) is True}
    if op in ("len", "bool", "str", "repr", "hash"):
        fn = {"len": len, "bool": bool, "str": str, "repr": repr, "hash": hash}[op]
        value = fn(target)
        if _type(value) not in (int, bool, str):
            raise TypeError(f"{op}() of a program object returned a {_type(value).__name__}")
        return {"ok": codec.to_tree(value)}
    raise ValueError(f"unknown request {op!r}")


