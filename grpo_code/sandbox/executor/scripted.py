"""The interpreted languages beyond JavaScript: each is an :class:`~.toolchain.Interpreted`
runner (the interpreter, its syntax check, its harness in ``harness/``) and nothing more.
Their script tests run in the program's process (``attested: false``); call tests report
the returned value as data (docs/languages.md)."""

from __future__ import annotations

import os

from .base import HARNESS_DIR
from .toolchain import Interpreted


class RubyRunner(Interpreted):
    """Ruby (MultiPL-E's tests use test/unit, run by the harness, not at exit)."""

    language = "ruby"
    interpreter = ("ruby",)
    check = ("ruby", "-c")
    harness = "ruby_harness.rb"
    suffix = ".rb"
    memory_marks = (b"failed to allocate memory (NoMemoryError)",)


class PhpRunner(Interpreted):
    """PHP (the CLI). A program without an opening ``<?php`` tag gets one. The harness takes
    the program from the payload: PHP opens /proc/self/fd/6 by its target's name, which a
    memory file lacks, and its ``php://fd/6`` shares the offset every test inherits."""

    language = "php"
    interpreter = ("php", "-d", "display_errors=stderr", "-d", "memory_limit=-1")
    check = ("php", "-l")
    harness = "php_harness.php"
    suffix = ".php"
    memory_marks = (b"Out of memory", b"Allowed memory size")

    def what(self, job, state, index):
        return {**super().what(job, state, index), "source": job["program"]}


class PerlRunner(Interpreted):
    """Perl 5 (MultiPL-E's tests use Test::Deep)."""

    language = "perl"
    interpreter = ("perl",)
    check = ("perl", "-c")
    harness = "perl_harness.pl"
    suffix = ".pl"
    memory_marks = (b"Out of memory!",)


class LuaRunner(Interpreted):
    """Lua 5.4 (MultiPL-E's tests use luaunit and end with ``os.exit(lu.LuaUnit.run())``,
    which the harness turns into the test's end)."""

    language = "lua"
    interpreter = ("lua5.4",)
    check = ("luac5.4", "-p")
    harness = "lua_harness.lua"
    suffix = ".lua"
    memory_marks = (b"not enough memory",)


class BashRunner(Interpreted):
    """Bash: script tests (MultiPL-E's: the program's function called through ``candidate``
    and compared with ``[[ ... = ... ]]`` under ``set -e``) and io tests; no call tests (a
    shell function returns text, not a value). The payload is the nonce's line, then the
    test's code as it is (the harness has no JSON reader)."""

    language = "bash"
    interpreter = ("bash",)
    check = ("bash", "-n")
    harness = "bash_harness.sh"
    suffix = ".sh"
    memory_marks = (b"xmalloc: cannot allocate", b"cannot allocate memory")

    def payload(self, nonce, what):
        return nonce.encode() + b"\n" + what["code"].encode("utf-8", "surrogatepass")


class RRunner(Interpreted):
    """R (``Rscript``; values through jsonlite: a uniform JSON array is a vector, as
    MultiPL-E's prompts take them, a length-one vector is reported as its element)."""

    language = "r"
    interpreter = ("Rscript", "--vanilla")
    check = ("Rscript", "--vanilla", "-e", "invisible(parse(file = commandArgs(TRUE)[1]))")
    harness = "r_harness.R"
    suffix = ".R"
    headroom_mb = 256
    memory_marks = (b"cannot allocate vector",)
    NOFILE = 256
    """R refuses to start with fewer open files than 1.67 x its DLL limit (at least 100)."""

    def prepare(self, job, workdir, compile):
        job["limits"]["nofile"] = max(int(job["limits"].get("nofile", 64)), self.NOFILE)
        return super().prepare(job, workdir, compile)


class RacketRunner(Interpreted):
    """Racket (``#lang racket`` programs; MultiPL-E's tests use rackunit, whose failed checks
    the harness reports). The harness reads the program, so a read error is its
    ``compile_error``; it is compiled at image build (``raco make``)."""

    language = "racket"
    interpreter = ("racket",)
    harness = "racket_harness.rkt"
    suffix = ".rkt"
    headroom_mb = 256
    memory_marks = (b"out of memory",)

    def warm(self) -> None:
        import subprocess

        subprocess.run(["raco", "make", os.path.join(HARNESS_DIR, self.harness)], check=True)
