"""Framing for the executor's channels.

* host <-> executor: JSON lines (see ``main.py``).
* executor <-> zygote: a unix socketpair; a request carries file descriptors
  (``SCM_RIGHTS``) and a small JSON header, the answer is one JSON line.
* program process <-> judge: a unix socketpair of length-prefixed JSON frames
  (4 bytes big-endian length, then the frame). A frame longer than the reader allows is
  refused, so a program cannot make the judge hold more than it chose to accept.
"""

from __future__ import annotations

import json
import os
import socket
import struct

MAX_FRAME = 64 * 1024 * 1024
_LEN = struct.Struct(">I")


class ChannelClosed(Exception):
    """The other end of a channel went away."""


class FrameError(Exception):
    """A frame that breaks the protocol (too long, torn, unreadable)."""


def send_frame(fd: int, data: bytes) -> None:
    data = _LEN.pack(len(data)) + data
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except (BrokenPipeError, ConnectionResetError):
            raise ChannelClosed() from None
        view = view[n:]


class FrameReader:
    """Frames from one end of a channel, read in large chunks (one read per message,
    usually, where reading length and body apart would take two)."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buf = bytearray()

    def _fill(self, need: int) -> None:
        while len(self.buf) < need:
            try:
                chunk = os.read(self.fd, max(65536, min(need - len(self.buf), 1 << 20)))
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                raise ChannelClosed()
            self.buf += chunk

    def frame(self, max_bytes: int = MAX_FRAME) -> bytes:
        """One frame; ``ChannelClosed`` at end of input, ``FrameError`` when it is too long."""
        self._fill(_LEN.size)
        (size,) = _LEN.unpack_from(self.buf)
        if size > max_bytes:
            raise FrameError(f"a message of {size} bytes (the limit is {max_bytes})")
        end = _LEN.size + size
        self._fill(end)
        data = bytes(self.buf[_LEN.size:end])
        del self.buf[:end]
        return data


def send_json(fd: int, obj) -> None:
    send_frame(fd, json.dumps(obj, separators=(",", ":"), allow_nan=True).encode())


def recv_json(reader: FrameReader, max_bytes: int = MAX_FRAME):
    try:
        return json.loads(reader.frame(max_bytes))
    except (ValueError, RecursionError):
        raise FrameError("an unreadable message") from None


def send_fds(sock: socket.socket, header: dict, fds: list[int]) -> None:
    """One JSON line with descriptors (the line is short: one sendmsg sends it whole)."""
    socket.send_fds(sock, [json.dumps(header).encode() + b"\n"], fds)


def recv_fds(sock: socket.socket, max_fds: int = 16) -> tuple[dict | None, list[int]]:
    """A header and its descriptors; ``(None, [])`` at end of input."""
    data, fds, _flags, _addr = socket.recv_fds(sock, 65536, max_fds)
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    return json.loads(data), list(fds)
