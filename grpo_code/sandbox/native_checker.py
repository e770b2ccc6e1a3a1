"""C++ checkers and interactors in testlib's style, compiled once and cached (docs/sandbox.md,
Checkers and Interactive tests).

A job's checker may be C++ (``{"language": "cpp", "source": ..., "headers": {...}}``):
trusted suite code called as ``checker INPUT OUTPUT ANSWER`` whose exit code decides, as
testlib's (0 accepted, 1 wrong answer, 2 presentation error, 3 the checker's own failure).
A C++ interactor (the same shape) is called as ``interactor INPUT OUTPUT ANSWER`` with the
program's output as its stdin and its stdout as the program's input. The host compiles
each once per source and headers, statically linked so that it runs in
every language's image, in the C++ sandbox image (docker) or with this machine's ``g++``
(local), once per process and key, and keeps the binary in ``<cache>/checkers``. What the executor receives in its
place is ``{"binary": BASE64}``; a wire job's other keys, and what a verdict store hashes
(the job with the source), stay as they were.

A checker that does not compile is the suite's fault, never the program's: the job fails
loudly with the compiler's message (``grpo-code tasks check`` shows it on the task).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grpo_code.errors import SandboxError
from grpo_code.paths import cache_dir

FLAGS = ("-std=gnu++17", "-O2", "-static", "-s", "-w")
"""How a checker is compiled: testlib's own advice (C++17, -O2), static so that one binary
runs in the Python, JavaScript and C++ images alike."""
COMPILE_TIMEOUT_S = 300.0
"""A checker with testlib.h compiles in about 10 s on one core; past this it is stuck."""
HEADER_NAMES = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")

Compiler = Callable[[dict[str, str]], bytes]
"""Source files by name (``checker.cpp`` and its headers) to the binary: the docker
backend's :func:`~grpo_code.sandbox.checker_image.compile_checker`, or
:func:`compile_on_host`."""

_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()
_BINARIES: OrderedDict[str, str] = OrderedDict()
"""Base64 of the binaries this process used last, by key: a task's jobs share one. At most
:data:`KEPT_BINARIES` (about 1 MB each); an older one is read from the cache again."""
KEPT_BINARIES = 64


def is_native(checker: Any) -> bool:
    return isinstance(checker, dict) and checker.get("language") == "cpp"


def problem(checker: Any) -> str | None:
    """What is wrong with a job's or a task's checker or interactor entry (``None``: nothing):
    Python source, or C++ with its headers (file names in the source's directory)."""
    if isinstance(checker, str):
        return None
    if not isinstance(checker, dict):
        return "must be Python source or C++ {language: cpp, source, headers}"
    extra = sorted(set(checker) - {"language", "source", "headers"})
    if extra:
        return f"has unknown keys {extra} (C++ takes language, source, headers)"
    if checker.get("language") != "cpp":
        return f"language is {checker.get('language')!r}: one that is not Python source is C++ (language: cpp)"
    if not isinstance(checker.get("source"), str) or not checker["source"].strip():
        return "source must be C++ source"
    headers = checker.get("headers") or {}
    if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        return "headers must map file names to their text"
    bad = [k for k in headers if not k or k.startswith(".") or not set(k) <= HEADER_NAMES]
    if bad:
        return f"headers: {bad[0]!r} is not a plain file name"
    return None


def key(checker: dict[str, Any]) -> str:
    """What the binary is made of: source, headers and flags."""
    body = json.dumps([checker["source"], sorted((checker.get("headers") or {}).items()), FLAGS])
    return hashlib.sha256(body.encode()).hexdigest()


def checkers_dir() -> Path:
    return cache_dir() / "checkers"


def binary(checker: dict[str, Any], compiler: Compiler) -> str:
    """The checker's binary as base64, compiled on first use (once per process and key: a
    second caller waits for the first) and read from the cache after that."""
    k = key(checker)
    with _LOCKS_GUARD:
        found = _BINARIES.get(k)
        if found is not None:
            _BINARIES.move_to_end(k)
            return found
        lock = _LOCKS.setdefault(k, threading.Lock())
    with lock:
        with _LOCKS_GUARD:
            if k in _BINARIES:
                return _BINARIES[k]
        path = checkers_dir() / k
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = compiler({"checker.cpp": checker["source"], **(checker.get("headers") or {})})
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{k}.{os.getpid()}.partial")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        text = base64.b64encode(data).decode()
        with _LOCKS_GUARD:
            _BINARIES[k] = text
            while len(_BINARIES) > KEPT_BINARIES:
                _BINARIES.popitem(last=False)
            _LOCKS.pop(k, None)
        return text


def compile_failed(output: str) -> SandboxError:
    tail = " | ".join(output.strip().splitlines()[-6:])[-1500:]
    return SandboxError(f"a C++ checker or interactor does not compile: {tail}",
                        "fix the task's source (grpo-code tasks check shows which task)")


def compile_on_host(files: dict[str, str]) -> bytes:
    """With this machine's g++ (the local backend)."""
    if shutil.which("g++") is None:
        raise SandboxError("a C++ checker or interactor needs g++ to compile it and this machine has none",
                           "apt-get install g++, or use the docker backend (its C++ image compiles it)")
    with tempfile.TemporaryDirectory(prefix="grpo-code-checker-") as tmp:
        for name, text in files.items():
            Path(tmp, name).write_text(text)
        try:
            done = subprocess.run(["g++", *FLAGS, "-o", "checker", "checker.cpp"], cwd=tmp, capture_output=True,
                                  text=True, timeout=COMPILE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise compile_failed(f"g++ ran past {COMPILE_TIMEOUT_S:.0f} s") from None
        if done.returncode != 0:
            raise compile_failed(done.stderr or done.stdout)
        return Path(tmp, "checker").read_bytes()


def compiled_wire(wire: dict[str, Any], compiler: Compiler) -> dict[str, Any]:
    """``wire`` with each C++ checker and interactor replaced by its binary (the same object
    when it has none)."""
    out = wire
    for field in ("checkers", "interactors"):
        found = wire.get(field)
        if not found or not any(is_native(c) for c in found.values()):
            continue
        if out is wire:
            out = type(wire)(wire)
            out.__dict__.update(getattr(wire, "__dict__", {}))  # a Wire keeps its encoded tests
        out[field] = {name: {"binary": binary(c, compiler)} if is_native(c) else c for name, c in found.items()}
    return out
