"""LiveCodeBench's packed tests: base64 of zlib of a pickle of the tests' JSON text.

Read as data only, in memory that follows the output, not what a record unpacks to:

- the pickle is never given to :func:`pickle.loads`: a pickle of one string (how
  LiveCodeBench packs its tests) is recognised by its opcodes and its text read straight
  out of the zlib stream; any other pickle goes through :func:`restricted_unpickle`, which
  builds strings, numbers, lists and dicts only;
- the string's length is in the pickle's header: one past :data:`MAX_UNPACKED` is refused
  before anything is unpacked;
- the text is decoded and its JSON list parsed a test at a time as the stream unpacks, so
  the unpacked bytes and the whole text are never held: memory is the tests kept plus the
  test being read (at most :data:`MAX_TEST_MB`);
- integers are read as :func:`grpo_code.tasks.records.parse_json` reads them (bounded time).
"""

from __future__ import annotations

import base64
import codecs
import io
import json
import pickle
import zlib
from collections.abc import Iterator
from typing import Any

from grpo_code.tasks.records import UNREADABLE_JSON, RecordError, json_decoder, json_problem, parse_json

MAX_UNPACKED = 1 << 30
"""The most bytes a compressed test blob may unpack to."""
MAX_TEST_MB = 64
"""The largest single test (its JSON text, in MiB) read from a packed blob."""
CHUNK = 16 << 20


class _DataOnly(pickle.Unpickler):
    """Builds what a pickle holds without ever looking up a class or function: GLOBAL,
    STACK_GLOBAL, INST, OBJ, REDUCE and the extension registry all go through
    ``find_class``, refused here; persistent ids are refused by the base class."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"names {module}.{name}; only strings, numbers, lists and dicts are read")


def _plain(value: Any, depth: int = 0) -> bool:
    if depth > 100:
        return False
    if value is None or isinstance(value, (str, bool, int, float)):
        return True
    if isinstance(value, list):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    return False


def restricted_unpickle(data: bytes) -> Any:
    """The value of a pickle that holds plain data only; anything else (a class, a function,
    a tuple, bytes) is a :class:`pickle.UnpicklingError`. Dataset bytes are never given to
    :func:`pickle.loads`."""
    try:
        value = _DataOnly(io.BytesIO(data)).load()
    except pickle.UnpicklingError:
        raise
    except Exception as exc:  # noqa: BLE001 - a malformed pickle: whatever the unpickler raised
        raise pickle.UnpicklingError(f"malformed ({type(exc).__name__})") from None
    if not _plain(value):
        raise pickle.UnpicklingError(f"holds a {type(value).__name__} that is not plain data")
    return value


class _Stream:
    """The unpacked bytes of zlib data, a chunk at a time, refused past :data:`MAX_UNPACKED`."""

    def __init__(self, packed: bytes, where: str):
        self.unzip = zlib.decompressobj()
        self.data = packed
        self.where = where
        self.total = 0
        self.pending = b""
        self.done = False

    def read(self, n: int = CHUNK) -> bytes:
        """Up to ``n`` more bytes (b"" at the end)."""
        while len(self.pending) < n and not self.done:
            if self.data:
                got = self.unzip.decompress(self.data, CHUNK)
                self.data = self.unzip.unconsumed_tail
            else:
                got = self.unzip.flush()
                self.done = True
            self.total += len(got)
            if self.total > MAX_UNPACKED:
                raise RecordError(self.where, f"unpacks to more than {MAX_UNPACKED >> 20} MiB")
            self.pending += got
        out, self.pending = self.pending[:n], self.pending[n:]
        return out


def unpack(text: str, where: str) -> Any:
    """The tests of a packed field (see the module docstring)."""
    try:
        packed = base64.b64decode(text.encode("ascii"), validate=True)
        stream = _Stream(packed, where)
        head = stream.read(64)
    except (ValueError, zlib.error, UnicodeEncodeError) as exc:
        raise RecordError(where, f"neither JSON nor base64 of zlib data ({exc})") from None
    found = _string_header(head)
    try:
        if found is not None:
            start, size = found
            if size > MAX_UNPACKED:
                raise RecordError(where, f"unpacks to more than {MAX_UNPACKED >> 20} MiB")
            try:
                return _parse_stream(_payload(stream, head[start:], size), where)
            except _NotOneString:
                pass  # it only began with a string: read as any other pickle, from the start
        stream = _Stream(packed, where)
        rest = []
        while chunk := stream.read():
            rest.append(chunk)
        value = restricted_unpickle(b"".join(rest))
        return _parse(value, where) if isinstance(value, str) else value
    except zlib.error as exc:
        raise RecordError(where, f"corrupt zlib data ({exc})") from None
    except pickle.UnpicklingError as exc:
        raise RecordError(where, f"a pickle that is not plain data: {exc}", "remove the record") from None


class _NotOneString(Exception):
    """The pickle holds more than the string it starts with."""


def _string_header(head: bytes) -> tuple[int, int] | None:
    """(where the text starts, its length in bytes) when the pickle is one string."""
    at = 2 if head[:1] == b"\x80" else 0  # PROTO n
    if head[at:at + 1] == b"\x95":  # FRAME + its 8-byte length
        at += 9
    width = {b"\x8c": 1, b"X": 4, b"\x8d": 8}.get(head[at:at + 1])  # SHORT_BINUNICODE, BINUNICODE, BINUNICODE8
    if width is None or len(head) < at + 1 + width:
        return None
    return at + 1 + width, int.from_bytes(head[at + 1:at + 1 + width], "little")


def _payload(stream: _Stream, first: bytes, size: int) -> Iterator[str]:
    """The string's text, decoded as it unpacks; its pickle must end right after it."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    left = size
    chunk = first
    while True:
        piece, chunk = chunk[:left], chunk[left:]
        left -= len(piece)
        try:
            yield decoder.decode(piece, final=left == 0)
        except UnicodeDecodeError:
            raise pickle.UnpicklingError("a string that is not UTF-8") from None
        if left == 0:
            break
        chunk = stream.read()
        if not chunk:
            raise pickle.UnpicklingError("the string is cut short")
    tail = chunk + stream.read(16)
    if tail not in (b".", b"\x94."):  # STOP, or MEMOIZE then STOP
        raise _NotOneString()


def _parse(text: str, where: str) -> Any:
    try:
        return parse_json(text)
    except UNREADABLE_JSON as exc:
        raise RecordError(where, json_problem(exc)) from None


def _parse_stream(texts: Iterator[str], where: str) -> Any:
    """A JSON list parsed an item at a time from ``texts``; any other JSON value whole."""
    decoder = json_decoder()()
    cap = MAX_TEST_MB << 20
    buf, pos, items, started, need_comma, retry_at = "", 0, [], False, False, 0
    stream = _with_end(texts)
    for text in stream:
        ended = text is None
        buf = buf[pos:] + (text or "")
        pos = 0
        if ended:
            retry_at = 0
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n":
                pos += 1
            if pos == len(buf):
                break
            if not started:
                if buf[pos] != "[":  # not a list: the whole text, parsed at the end
                    return _parse(buf[pos:] + "".join(t for t in stream if t is not None), where)
                started, pos = True, pos + 1
                continue
            if buf[pos] == "]":
                if buf[pos + 1:].strip() or "".join(t for t in stream if t is not None).strip():
                    raise RecordError(where, "not valid JSON (extra data after the list)")
                return items
            if need_comma:
                if buf[pos] != ",":
                    raise RecordError(where, "not valid JSON (a comma is missing between tests)")
                pos, need_comma = pos + 1, False
                continue
            if not ended and len(buf) - pos < retry_at:
                break  # the item is still incomplete: read on before parsing it again
            try:
                item, end = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError as exc:
                if ended:
                    raise RecordError(where, f"not valid JSON ({exc.msg})") from None
                if len(buf) - pos > cap:
                    raise RecordError(where, f"a test over {MAX_TEST_MB} MiB") from None
                retry_at = 2 * (len(buf) - pos)  # parse again once twice as much is read: linear time
                break
            except UNREADABLE_JSON as exc:
                raise RecordError(where, json_problem(exc)) from None
            items.append(item)
            pos, retry_at, need_comma = end, 0, True
    raise RecordError(where, "not valid JSON (the list is cut short)" if started else "not valid JSON (empty)")


def _with_end(texts: Iterator[str]) -> Iterator[str | None]:
    yield from texts
    yield None
