"""The judge's end of a Python ``script`` test's channel to the program (``judge.py``).

:class:`Link` sends the judge's requests and decodes the answers; :class:`ProgramObject`
stands for a function, class or object that lives in the program's process, so the test
calls, reads and compares it over the channel with plain values only. A test function the
test hands to the program (a callback) stays here: the program gets a number for it and
calls it back through the channel, where :meth:`Link.callback` runs it. Standard library only.
"""

from __future__ import annotations

from . import codec, nodes, protocol, raised

_type = type


class ProgramGone(Exception):
    """The program's process ended (or closed the channel) during the test."""


class ProtocolViolation(Exception):
    """The program's process sent something that is not a valid answer."""





class Link:
    """The judge's end of the socket to the program's process."""

    def __init__(self, fd: int, max_bytes: int):
        self.fd = fd
        self.max_bytes = max_bytes
        self.reader = protocol.FrameReader(fd)
        self.kept: dict = {}  # the test's functions the program holds, by number
        self._kept_ids: dict = {}

    def keep(self, fn) -> int:
        """The number under which the program may call the test's ``fn``."""
        number = self._kept_ids.get(id(fn))
        if number is None:
            number = self._kept_ids[id(fn)] = len(self.kept) + 1
            self.kept[number] = fn
        return number

    def receive(self):
        try:
            return protocol.recv_json(self.reader, self.max_bytes)
        except protocol.ChannelClosed:
            raise ProgramGone() from None
        except protocol.FrameError as exc:
            raise ProtocolViolation(str(exc)) from None

    def send(self, msg: dict) -> None:
        try:
            protocol.send_json(self.fd, msg)
        except protocol.ChannelClosed:
            raise ProgramGone() from None

    def callback(self, msg) -> None:
        """The program calls a test function it was passed (``{"cb": {"ref", "args",
        "kwargs"}}``): run here, its value or exception sent back. The channel's own
        failures end the test; anything the function raises is the program's to handle."""
        if _type(msg) is not dict or _type(msg.get("ref")) is not int or msg["ref"] not in self.kept:
            raise ProtocolViolation("malformed callback")
        try:
            args, kwargs = msg.get("args"), msg.get("kwargs")
            if _type(args) is not list or _type(kwargs) is not dict:
                raise codec.CodecError("malformed callback arguments")
            args = [codec.from_tree(a, self.handle) for a in args]
            kwargs = {str(k): codec.from_tree(v, self.handle) for k, v in kwargs.items()}
        except (codec.CodecError, RecursionError) as exc:
            raise ProtocolViolation(str(exc)) from None
        try:
            reply = {"ok": _encode(self.kept[msg["ref"]](*args, **kwargs), self)}
        except (ProgramGone, ProtocolViolation):
            raise
        except BaseException as exc:
            reply = {"raise": {"type": raised.builtin_base(_type(exc)), "message": _exception_line(exc).strip()[:2000]}}
        self.send(reply)

    def next_item(self, ref):
        """The next item of the program's iterator ``ref``; ``StopIteration`` at its end."""
        reply = self.request({"op": "next", "ref": ref})
        if _type(reply) is not list or len(reply) not in (0, 1):
            raise ProtocolViolation("malformed answer")
        if not reply:
            raise StopIteration
        return reply[0]

    def request(self, msg: dict, args=None, kwargs=None):
        self.send(msg)
        reply = self.receive()
        while _type(reply) is dict and "cb" in reply:
            self.callback(reply["cb"])
            reply = self.receive()
        if _type(reply) is not dict:
            raise ProtocolViolation("malformed answer")
        if "raise" in reply:
            try:
                exc = raised.program_exception(reply["raise"])
                held = reply["raise"].get("object")
                if _type(held) is dict and _type(held.get("$h")) is int and held["$h"] > 0:
                    exc.program_object = ProgramObject(self, held["$h"], str(held.get("t", ""))[:200])
            except ValueError:
                raise ProtocolViolation("malformed exception") from None
            raise exc
        if "ok" not in reply:
            raise ProtocolViolation("malformed answer")
        try:
            value = codec.from_tree(reply["ok"], self.handle)
            mutated = reply.get("mut") or {}
            if mutated and _type(mutated) is dict:
                self._apply(mutated, args or (), kwargs or {})
        except codec.CodecError as exc:
            raise ProtocolViolation(str(exc)) from None
        return value

    def handle(self, hid: int, type_name: str):
        if hid < 0:  # a test function the program was passed, coming back
            fn = self.kept.get(-hid)
            if fn is None:
                raise codec.CodecError(f"no test function {-hid}")
            return fn
        return ProgramObject(self, hid, type_name)

    def _apply(self, mutated: dict, args, kwargs) -> None:
        """Changes the program made to list/dict/set/bytearray arguments, made here too."""
        for key, tree in mutated.items():
            if _type(key) is not str:
                raise ProtocolViolation("malformed answer")
            target = args[int(key)] if key.isdigit() and int(key) < len(args) else kwargs.get(key)
            new = codec.from_tree(tree, self.handle)
            t = _type(target)
            if t is not _type(new):
                continue
            if t in (nodes.ListNode, nodes.TreeNode):  # a LeetCode "modify in place" answer
                target.__dict__.clear()
                target.__dict__.update(new.__dict__)
            elif t is list or t is bytearray:
                target[:] = new
            elif t is dict or t is set:
                target.clear()
                target.update(new)


class ProgramObject:
    """A function, class or object that lives in the program's process."""

    __slots__ = ("_link", "_ref", "_type_name")

    def __init__(self, link: Link, ref, type_name: str):
        object.__setattr__(self, "_link", link)
        object.__setattr__(self, "_ref", ref)
        object.__setattr__(self, "_type_name", type_name)

    def _ask(self, op: str, **fields):
        return self._link.request({"op": op, "ref": self._ref, **fields})

    def __call__(self, *args, **kwargs):
        link = self._link
        msg = {"op": "call", "ref": self._ref, "args": [_encode(a, link) for a in args],
               "kwargs": {str(k): _encode(v, link) for k, v in kwargs.items()}}
        return self._link.request(msg, args, kwargs)

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._ask("getattr", attr=name)

    def __setattr__(self, name: str, value) -> None:
        self._ask("setattr", attr=name, value=_encode(value, self._link))

    def __iter__(self):
        items = self._ask("iter")
        if items is None:  # an iterator of the program's (a generator): item by item, never all at once
            return _ProgramIterator(self)
        return iter(items)

    def __next__(self):
        return self._link.next_item(self._ref)

    def __contains__(self, item) -> bool:
        # Decided here, on the items: the program never sees what is looked for.
        return item in iter(self)

    def __getitem__(self, key):
        return self._ask("getitem", key=_encode(key, self._link))

    def __len__(self) -> int:
        return self._ask("len")

    def __bool__(self) -> bool:
        return self._ask("bool")

    def __str__(self) -> str:
        return self._ask("str")

    def __repr__(self) -> str:
        return self._ask("repr")

    def __eq__(self, other):
        if _type(other) is ProgramObject and other._link is self._link:
            return self._ask("eq", other=other._ref)
        return NotImplemented

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = object.__hash__

    def __instancecheck__(self, instance) -> bool:
        """``isinstance(x, C)`` for a class ``C`` of the program's: asked of the program for
        its own objects; for an exception it raised, by its classes' names; else False (a
        value decoded here is no instance of the program's classes)."""
        if _type(instance) is ProgramObject:
            if instance._link is not self._link:
                return False
            return self._link.request({"op": "isinstance", "ref": instance._ref, "other": self._ref}) is True
        classes = getattr(instance, "program_classes", None)
        if _type(classes) is tuple and classes:
            name = self._link.request({"op": "getattr", "ref": self._ref, "attr": "__qualname__"})
            return _type(name) is str and name in classes
        return False

    def __subclasscheck__(self, cls) -> bool:
        if _type(cls) is ProgramObject and cls._link is self._link:
            return self._link.request({"op": "issubclass", "ref": cls._ref, "other": self._ref}) is True
        return False


class _ProgramIterator:
    """A program's iterator read one item at a time (an infinite generator stays lazy)."""

    __slots__ = ("_of",)

    def __init__(self, of: ProgramObject):
        self._of = of

    def __iter__(self):
        return self

    def __next__(self):
        return object.__getattribute__(self._of, "_link").next_item(object.__getattribute__(self._of, "_ref"))


class _Refs:
    """Lets :func:`codec.to_tree` pass the program's own objects back as their handles, and
    the test's functions (callbacks, functions a program's decorator wraps) as negative
    handles the program can call back (:meth:`Link.callback`)."""

    def __init__(self, link: Link):
        self.link = link

    def add(self, value) -> dict:
        if _type(value) is ProgramObject:
            return {"$h": object.__getattribute__(value, "_ref"), "t": object.__getattribute__(value, "_type_name")}
        if callable(value) and not isinstance(value, type):
            return {"$h": -self.link.keep(value), "t": "test"}
        raise codec.CodecError(f"the test passed a {_type(value).__name__} to the program; only plain values, "
                               "functions and the program's own objects can be passed")


class Unsendable(BaseException):
    """The test passed the program something that cannot be sent. A ``BaseException`` of the
    judge's own: a ``TypeError`` here would satisfy the test's ``pytest.raises(TypeError)``
    before the program ran at all."""


def _encode(value, link: Link):
    """A test value as a tree for the program."""
    try:
        return codec.to_tree(value, _Refs(link))
    except codec.CodecError as exc:
        raise Unsendable(str(exc)) from None


def _exception_line(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException:
        text = "<the message could not be shown>"
    name = _type(exc).__name__
    return f"{name}: {text}\n" if text else f"{name}\n"
