"""Every fact the host knows of each sandbox language, in one table (:data:`FACTS`).

The runners themselves (:mod:`.executor.runners`) are part of the sandbox image and of its
hash; facts only the host acts on live here, so changing how the host treats a language
leaves the image, its fingerprint and every stored verdict as they are. Prompts, code
extraction, the image builder, the adapters and the SandboxFusion API read their facts
from here (``tests/test_layout.py`` fails on a table keyed by language names elsewhere).
Adding a language: a runner in the executor, a Dockerfile, and an entry here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from grpo_code.sandbox.executor.runners import RUNNERS


@dataclass(frozen=True)
class Language:
    """One language's facts (``code_start``, ``last_function``: regular expressions)."""

    display: str
    """How prompts name it (``{language_name}``)."""
    fence: str
    """The fence tag prompts ask for (``{fence}``)."""
    fence_tags: tuple[str, ...]
    """The fence tags code extraction takes as this language's."""
    aliases: tuple[str, ...]
    """Other names datasets and APIs give it (MultiPL-E's file extensions, SandboxFusion's
    language names)."""
    bootstrap_packages: tuple[str, ...]
    """Debian packages of its image when built from Debian sources (``--bootstrap``)."""
    modules: tuple[str, ...] = ()
    """Third-party Python modules the language's common datasets assume (Python only):
    ``sandbox doctor`` checks that the image imports them."""
    compiled: bool = False
    """Its jobs are built before their tests run: the host sends the compile limits, adds the
    build time to a job's deadline and sizes the container for the compiler."""
    call_tests: bool = True
    """It takes ``call`` tests (a function called with values)."""
    code_start: str | None = None
    """Where unfenced code starts in a chat answer (None: Python's rule in ``tasks/extract.py``)."""
    last_function: str | None = None
    """A function definition in a prompt (a record without an entry point names the last)."""

    @property
    def image(self) -> str:
        return f"grpo-code-sandbox-{self.name}:latest"

    @property
    def name(self) -> str:
        return next(k for k, v in FACTS.items() if v is self)


FACTS: dict[str, Language] = {
    "python": Language(
        display="Python", fence="python", fence_tags=("python", "python3", "py"), aliases=("py", "python3"),
        # LeetCode's judge has sortedcontainers; solutions in TACO, APPS and KodCode import numpy.
        bootstrap_packages=("python3", "python3-sortedcontainers", "python3-numpy"),
        modules=("sortedcontainers", "numpy")),
    "javascript": Language(
        display="JavaScript", fence="javascript", fence_tags=("javascript", "js", "node"), aliases=("js", "nodejs"),
        bootstrap_packages=("python3", "nodejs"),
        code_start=r"^(function[\s*]|async function |const |let |var |class |'use strict'|\"use strict\""
                   r"|module\.exports)",
        last_function=r"(?:function\s+([A-Za-z_$][\w$]*)\s*\(|(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=)"),
    "cpp": Language(
        display="C++", fence="cpp", fence_tags=("cpp", "c++", "cc", "cxx"), aliases=("c++",),
        bootstrap_packages=("python3", "g++"), compiled=True,
        code_start=r"^(#include|using |template\s*<|namespace |struct |class |(?:static |inline )*(?:const )?"
                   r"(?:int|long|bool|void|double|float|char|auto|unsigned|size_t|std::|string|vector)\b)",
        last_function=r"\b([A-Za-z_]\w*)\s*\([^;{}()]*\)\s*(?:const\s*)?\{"),
    "go": Language(
        display="Go", fence="go", fence_tags=("go", "golang"), aliases=("golang", "go_test"),
        bootstrap_packages=("python3", "golang-go", "golang-github-stretchr-testify-dev"), compiled=True,
        code_start=r"^(package |import |func |type |var |const )",
        last_function=r"^func\s+([A-Za-z_]\w*)\s*\("),
    "rust": Language(
        display="Rust", fence="rust", fence_tags=("rust", "rs"), aliases=("rs",),
        # HumanEval-X's Rust uses the rand, regex and md5 crates (compiled at image build)
        bootstrap_packages=("python3", "rustc", "cargo", "librust-rand-dev", "librust-regex-dev", "librust-md5-dev",
                            "librust-aho-corasick-dev", "librust-memchr-dev"),
        compiled=True,
        code_start=r"^(use |fn |pub |struct |enum |impl |mod |const |static |#\[|#!\[)",
        last_function=r"\bfn\s+([A-Za-z_]\w*)\s*(?:<[^>]*>)?\s*\("),
    "typescript": Language(
        display="TypeScript", fence="typescript", fence_tags=("typescript", "ts"), aliases=("ts", "jest"),
        bootstrap_packages=("python3", "nodejs", "node-typescript"), compiled=True,
        code_start=r"^(function[\s*]|async function |const |let |var |class |interface |type |export |import )",
        last_function=r"(?:function\s+([A-Za-z_$][\w$]*)\s*[<(]|(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=)"),
    "ruby": Language(
        display="Ruby", fence="ruby", fence_tags=("ruby", "rb"), aliases=("rb",),
        bootstrap_packages=("python3", "ruby", "ruby-test-unit"),
        code_start=r"^(def |class |module |require |include )",
        last_function=r"^\s*def\s+(?:self\.)?([A-Za-z_]\w*[?!]?)"),
    "php": Language(
        display="PHP", fence="php", fence_tags=("php",), aliases=(),
        bootstrap_packages=("python3", "php-cli"),
        code_start=r"^(<\?php|function |class |\$|namespace |use )",
        last_function=r"\bfunction\s+([A-Za-z_]\w*)\s*\("),
    "perl": Language(
        display="Perl", fence="perl", fence_tags=("perl", "pl"), aliases=("pl",),
        bootstrap_packages=("python3", "perl", "libtest-deep-perl"),
        code_start=r"^(sub |use |my |package )",
        last_function=r"^\s*sub\s+([A-Za-z_]\w*)"),
    "lua": Language(
        display="Lua", fence="lua", fence_tags=("lua",), aliases=(),
        bootstrap_packages=("python3", "lua5.4", "lua-unit"),
        code_start=r"^(local |function |require)",
        last_function=r"\bfunction\s+([A-Za-z_][\w.:]*)\s*\("),
    "bash": Language(
        display="Bash", fence="bash", fence_tags=("bash", "sh", "shell"), aliases=("sh", "shell"),
        bootstrap_packages=("python3", "bash"), call_tests=False,
        code_start=r"^(#!|[A-Za-z_]\w*\s*\(\)\s*\{|function |set |declare |local )",
        last_function=r"^\s*(?:function\s+)?([A-Za-z_]\w*)\s*\(\)"),
    "r": Language(
        display="R", fence="r", fence_tags=("r", "R"), aliases=("R",),
        bootstrap_packages=("python3", "r-base-core", "r-cran-jsonlite"),
        code_start=r"^([A-Za-z_.][\w.]*\s*<-\s*function|library\(|suppressPackageStartupMessages)",
        last_function=r"([A-Za-z_.][\w.]*)\s*<-\s*function\s*\("),
    "racket": Language(
        display="Racket", fence="racket", fence_tags=("racket", "rkt", "scheme"), aliases=("rkt",),
        bootstrap_packages=("python3", "racket"),
        code_start=r"^(#lang |\(define |\(require )",
        last_function=r"\(define\s+\(([^\s()]+)"),
    "java": Language(
        display="Java", fence="java", fence_tags=("java",), aliases=("junit",),
        bootstrap_packages=("python3", "default-jdk-headless"), compiled=True,
        code_start=r"^(import |package |class |public |final |abstract |interface |enum |record )",
        last_function=r"\b(?:public|private|protected|static|\s)+[\w<>\[\],\s]+?\s([A-Za-z_]\w*)\s*\([^;{}]*\)\s*(?:throws [\w.,\s]+)?\{"),
}

LANGUAGES = tuple(RUNNERS)
"""The languages the sandbox runs, in the executor's order (Python first)."""
if set(FACTS) != set(LANGUAGES):  # a runner without its facts, or facts without a runner
    raise ImportError(f"sandbox languages: the executor runs {sorted(LANGUAGES)}, the host knows {sorted(FACTS)}")

COMPILED = frozenset(k for k, v in FACTS.items() if v.compiled)
"""Languages whose jobs are built before their tests run (:attr:`Language.compiled`)."""

CALL_TESTS = frozenset(k for k, v in FACTS.items() if v.call_tests)
"""Languages that take ``call`` tests; the others take ``script`` and ``io`` tests only, and
a suite that gives them call tests is refused."""

ALIASES = {**{a: k for k, v in FACTS.items() for a in v.aliases}, **{k: k for k in FACTS}}
"""Every name of a language (its own and its aliases) to its name here."""


def code_start(language: str) -> re.Pattern | None:
    """Where unfenced code starts in a chat answer in ``language`` (None: Python's rule)."""
    facts = FACTS.get(language)
    return re.compile(facts.code_start, re.M) if facts is not None and facts.code_start else None


def last_function(language: str) -> re.Pattern | None:
    facts = FACTS.get(language)
    return re.compile(facts.last_function, re.M) if facts is not None and facts.last_function else None
