"""Go (``go`` 1.19 in GOPATH mode, with testify as HumanEval-X's tests assume).

``io`` tests run the program built alone (``go build``). Script tests are Go test files
(``func TestX(t *testing.T)``, testify's ``assert``), HumanEval-X's and MultiPL-E's form:
the program and every script test build into one test binary with ``harness/go_script_test.go``,
whose ``TestMain`` runs one test's functions and reports; they run in the program's process
(``attested: false``). Call tests build the program with ``harness/go_call_test.go``, which
decodes the arguments into the function's own parameter types (reflection) and reports
the returned value. Every build starts from a copy of the image's warm build cache (the
standard library and testify, compiled at image build), so no job's build can reuse what
an earlier job wrote.
"""

from __future__ import annotations

import os
import re
import shutil

from .base import HARNESS_DIR, write
from .toolchain import Built, Toolchain, compiled, env_argv

WARM_CACHE = "/opt/grpo-code/gocache"
HOST_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "grpo-code", "go-build")
GOPATH = "/usr/share/gocode"
"""Where Debian's Go libraries are (golang-github-stretchr-testify-dev)."""
_PACKAGE = re.compile(r"^[ \t]*package\s+\w+", re.M)
_TEST_FUNC = re.compile(r"^func\s+(Test\w*)\s*\(", re.M)


def _harness(name: str) -> str:
    with open(os.path.join(HARNESS_DIR, name), encoding="utf-8") as f:
        return f.read()


def in_package(code: str) -> str:
    """Go source in package main (a test or program given without its package clause)."""
    return code if _PACKAGE.search(code) else "package main\n\n" + code


_IMPORT_BLOCK = re.compile(r"^import\s*\(([^)]*)\)[ \t]*\n?|^import\s+((?:[\w.]+\s+)?\"[^\"]+\")[ \t]*\n?", re.M)
_IMPORT_SPEC = re.compile(r"^[ \t]*(?:([\w.]+)[ \t]+)?\"([^\"]+)\"", re.M)
_NOT_CODE = re.compile(r'//[^\n]*|/\*(?:.*?\*/|.*\Z)|"(?:\\.|[^"\\\n])*"|`[^`]*`', re.S)
STANDARD = ("bufio", "bytes", "container/heap", "container/list", "crypto/md5", "crypto/sha256", "errors", "fmt",
            "math", "math/big", "math/bits", "math/rand", "os", "reflect", "regexp", "sort", "strconv", "strings",
            "time", "unicode", "unicode/utf8")
"""Standard packages a program may use without importing them (HumanEval-X's harness adds
the ones its solutions use)."""


def tidy_imports(program: str) -> str:
    """The program with the imports it uses, as ``goimports`` leaves them: an import nothing
    refers to is dropped (Go refuses to build with one: HumanEval-X's prompts import ``math``
    for solutions that may not use it) and a standard package it refers to but does not
    import is added, as HumanEval-X's harness does. Blank and dot imports stay."""
    specs = []
    # No match is tried past the last ')' (each would scan to the end: quadratic on
    # untrusted text); an import block needs one.
    end = program.rfind(")") + 1
    for block in _IMPORT_BLOCK.finditer(program, 0, end):
        specs += _IMPORT_SPEC.findall(block.group(1) or block.group(2) or "")
    body = _IMPORT_BLOCK.sub("", program[:end]) + program[end:]
    code = _NOT_CODE.sub(" ", body)  # a package named in a comment or a string is not used
    used = set(re.findall(r"\b([A-Za-z_]\w*)\s*\.\s*[A-Za-z_]", code))
    kept = [(alias, path) for alias, path in specs
            if alias in ("_", ".") or (alias or path.rsplit("/", 1)[-1]) in used]
    have = {path for _, path in kept}
    kept += [("", path) for path in STANDARD if path not in have and path.rsplit("/", 1)[-1] in used
             and not re.search(rf"\b(?:var|const|func)\s+{path.rsplit('/', 1)[-1]}\b|\b{path.rsplit('/', 1)[-1]}\s*:=", code)]
    block = "import (\n" + "".join(f"\t{alias + ' ' if alias else ''}\"{path}\"\n" for alias, path in kept) + ")\n" if kept else ""
    body = in_package(body)
    head = _PACKAGE.search(body)
    return body[:head.end()] + "\n\n" + block + body[head.end():]


def _quoted(names) -> str:
    return ", ".join('"' + n + '"' for n in names)


class GoRunner(Toolchain):
    language = "go"
    tools = ("go",)
    failed_marks = (b"--- FAIL",)
    headroom_mb = 768
    """The Go runtime reserves ~650 MiB of address space at start-up (measured: a program
    under 700 MiB starts, its heap gets about ``memory_mb`` more)."""
    memory_marks = (b"fatal error: out of memory", b"runtime: out of memory")

    def io_files(self, program):
        return {"main.go": tidy_imports(program)}

    def script_files(self, program, codes):
        files = {"script/main.go": tidy_imports(program), "script/grpo_wire.go": _harness("go_wire.go"),
                 "script/grpo_harness_test.go": _harness("go_script_test.go")}
        table = []
        for i, code in enumerate(codes):
            # HumanEval-X's tests use the packages of the program's file (its harness builds one
            # file of both): tidied like the program's
            files[f"script/test{i}_test.go"] = tidy_imports(code)
            table.append("\t{" + _quoted(_TEST_FUNC.findall(code)) + "},")
        files["script/grpo_table_test.go"] = "package main\n\nvar grpoTests = [][]string{\n" + "\n".join(table) + "\n}\n"
        return files

    def call_files(self, program, fns):
        entries = "".join(f'\t"{fn}": {fn},\n' for fn in fns)
        return {"call/main.go": tidy_imports(program), "call/grpo_wire.go": _harness("go_wire.go"),
                "call/grpo_harness_test.go": _harness("go_call_test.go"),
                "call/grpo_table_test.go": "package main\n\nvar grpoFunctions = map[string]interface{}{\n" + entries + "}\n"}

    def build(self, kind, files, workdir, compile, memory_mb) -> Built:
        if os.path.isdir(WARM_CACHE):  # once per job: a fresh copy of the image's warm cache
            cache = os.path.join(workdir, ".gocache")
            if not os.path.isdir(cache):
                if not self._room_for_cache(workdir):
                    return Built(error="the program's build does not fit the work directory "
                                       "(no room left for Go's build cache)")
                shutil.copytree(WARM_CACHE, cache)
        else:  # the local backend (no isolation to keep): the user's own Go build cache
            cache = HOST_CACHE
        env = {"GO111MODULE": "off", "GOPATH": GOPATH, "GOCACHE": cache, "CGO_ENABLED": "0"}
        if kind == "io":
            argv = ["go", "build", "-o", "io.bin", "main.go"]
        else:  # go test builds every file of the folder into one test binary
            argv = ["go", "test", "-c", "-o", f"{kind}.bin", f"./{kind}"]
        return compiled(compile(env_argv(env, argv), f"{kind}.bin"))

    _cache_size: tuple[int, int] | None = None

    def _room_for_cache(self, workdir: str) -> bool:
        """Whether the work directory has the bytes and inodes a copy of the warm cache takes
        (a program of tens of MiB leaves too little: its verdict, not the executor's error)."""
        if self._cache_size is None:
            size = files = 0
            for root, dirs, names in os.walk(WARM_CACHE):
                files += len(dirs) + len(names)
                size += sum(os.lstat(os.path.join(root, n)).st_size + 4096 for n in names)
            GoRunner._cache_size = (size, files)
        size, files = self._cache_size
        st = os.statvfs(workdir)
        return st.f_bavail * st.f_frsize > size + (1 << 20) and (st.f_files == 0 or st.f_favail > files + 64)

    def warm(self) -> None:
        """Compile the standard library's and testify's packages the harnesses use into
        :data:`WARM_CACHE`, which every job's build starts from a copy of."""
        import subprocess  # image build only: the executor's warm parent stays small
        import tempfile
        sample = "package main\n\nfunc Twice(x int) int { return 2 * x }\n"
        test = ('import (\n\t"testing"\n\t"github.com/stretchr/testify/assert"\n)\n\n'
                "func TestTwice(t *testing.T) { assert.New(t).Equal(4, Twice(2)) }\n")
        env = {**os.environ, "GO111MODULE": "off", "GOPATH": GOPATH, "GOCACHE": WARM_CACHE, "CGO_ENABLED": "0"}
        with tempfile.TemporaryDirectory() as work:
            for kind, files in (("script", self.script_files(sample, [test])), ("call", self.call_files(sample, ["Twice"]))):
                for name, text in files.items():
                    write(work, name, text)
                subprocess.run(["go", "test", "-c", "-o", f"{kind}.bin", f"./{kind}"], cwd=work, env=env, check=True)
            write(work, "main.go", sample + "\nfunc main() {}\n")
            subprocess.run(["go", "build", "-o", "io.bin", "main.go"], cwd=work, env=env, check=True)
        subprocess.run(["go", "version"], check=True)
