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
import subprocess
import tempfile

from .base import HARNESS_DIR, write
from .toolchain import Built, Toolchain, compiled, env_argv

WARM_CACHE = "/opt/grpo-code/gocache"
HOST_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "grpo-code", "go-build")
GOPATH = "/usr/share/gocode"
"""Where Debian's Go libraries are (golang-github-stretchr-testify-dev)."""
_PACKAGE = re.compile(r"^\s*package\s+\w+", re.M)
_TEST_FUNC = re.compile(r"^func\s+(Test\w*)\s*\(", re.M)


def _harness(name: str) -> str:
    with open(os.path.join(HARNESS_DIR, name), encoding="utf-8") as f:
        return f.read()


def in_package(code: str) -> str:
    """Go source in package main (a test or program given without its package clause)."""
    return code if _PACKAGE.search(code) else "package main\n\n" + code


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
        return {"main.go": in_package(program)}

    def script_files(self, program, codes):
        files = {"script/main.go": in_package(program), "script/grpo_wire.go": _harness("go_wire.go"),
                 "script/grpo_harness_test.go": _harness("go_script_test.go")}
        table = []
        for i, code in enumerate(codes):
            files[f"script/test{i}_test.go"] = in_package(code)
            table.append("\t{" + _quoted(_TEST_FUNC.findall(code)) + "},")
        files["script/grpo_table_test.go"] = "package main\n\nvar grpoTests = [][]string{\n" + "\n".join(table) + "\n}\n"
        return files

    def call_files(self, program, fns):
        entries = "".join(f'\t"{fn}": {fn},\n' for fn in fns)
        return {"call/main.go": in_package(program), "call/grpo_wire.go": _harness("go_wire.go"),
                "call/grpo_harness_test.go": _harness("go_call_test.go"),
                "call/grpo_table_test.go": "package main\n\nvar grpoFunctions = map[string]interface{}{\n" + entries + "}\n"}

    def build(self, kind, files, workdir, compile, memory_mb) -> Built:
        if os.path.isdir(WARM_CACHE):  # once per job: a fresh copy of the image's warm cache
            cache = os.path.join(workdir, ".gocache")
            if not os.path.isdir(cache):
                shutil.copytree(WARM_CACHE, cache)
        else:  # the local backend (no isolation to keep): the user's own Go build cache
            cache = HOST_CACHE
        env = {"GO111MODULE": "off", "GOPATH": GOPATH, "GOCACHE": cache, "CGO_ENABLED": "0"}
        if kind == "io":
            argv = ["go", "build", "-o", "io.bin", "main.go"]
        else:  # go test builds every file of the folder into one test binary
            argv = ["go", "test", "-c", "-o", f"{kind}.bin", f"./{kind}"]
        return compiled(compile(env_argv(env, argv), f"{kind}.bin"))

    def warm(self) -> None:
        """Compile the standard library's and testify's packages the harnesses use into
        :data:`WARM_CACHE`, which every job's build starts from a copy of."""
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
