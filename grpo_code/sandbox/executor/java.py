"""Java (OpenJDK's javac and java).

``io`` tests run the program's ``main`` (the class that declares it). Script tests are
HumanEval-X's ``public class Main { public static void main(...) }`` after the program, or
MultiPL-E's rest of the program's class (its ``main`` and the closing brace): each test is
the program and that test's text in a package of its own (``grpo_t<i>``; a top-level
``public`` is dropped, so the file's name does not matter), all compiled by one ``javac``;
``harness/GrpoHarness.java`` runs the test's ``main`` and reports, in the program's process
(``attested: false``). Call tests compile the program in package ``grpo_call``; the harness
finds the method the test names in the program's top-level classes (an instance method
on a new instance, as HumanEval-X's ``Solution``), decodes the arguments into its generic
parameter types and reports the result as data. The classes travel as one sealed jar.
"""

from __future__ import annotations

import os
import re

from .base import HARNESS_DIR, seal
from .toolchain import Built, Toolchain

WARM = "/opt/grpo-code/java"
"""The harness, compiled at image build (``--warm``); without it each job compiles it."""
_PUBLIC = re.compile(r"^public[ \t]+((?:(?:final|abstract|sealed|strictfp)[ \t]+)*(?:class|interface|enum|record)\b)", re.M)
_CLASS = re.compile(r"^(?:(?:public|final|abstract)[ \t]+)*class\s+([A-Za-z_$][\w$]*)", re.M)
_MAIN = re.compile(r"\bstatic\s+(?:public\s+)?void\s+main\s*\(")
FLAGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:ReservedCodeCacheSize=64m",
         "-XX:CompressedClassSpaceSize=64m", "-XX:MaxMetaspaceSize=256m", "-ea")


def main_class(text: str) -> str:
    """The top-level class whose body declares ``main`` (the last class before it)."""
    found = _MAIN.search(text)
    names = [m for m in _CLASS.finditer(text) if found is None or m.start() < found.start()]
    return names[-1].group(1) if names else "Main"


def unit(package: str | None, text: str) -> str:
    head = f"package {package};\n" if package else ""
    return head + _PUBLIC.sub(r"\1", text)


class JavaRunner(Toolchain):
    language = "java"
    tools = ("javac", "java")
    headroom_mb = 1024
    """The JVM reserves code cache, class space and metaspace beyond its heap (-Xmx)."""
    memory_marks = (b"java.lang.OutOfMemoryError",)
    failed_marks = (b"java.lang.AssertionError",)

    def io_files(self, program):
        return {"src/Main.java": unit(None, program)}

    def script_files(self, program, codes):
        return {f"src/grpo_t{i}/Test.java": unit(f"grpo_t{i}", program + "\n" + code) for i, code in enumerate(codes)}

    def call_files(self, program, fns):
        return {"src/grpo_call/Program.java": unit("grpo_call", program)}

    def build(self, kind, files, workdir, compile, memory_mb) -> Built:
        out = os.path.join(workdir, f"{kind}.classes")
        sources = list(files)
        classpath = WARM if os.path.isdir(WARM) else None
        if kind != "io" and classpath is None:
            sources.append(os.path.join(HARNESS_DIR, "GrpoHarness.java"))
        javac = ["javac", "-J-Xmx512m", *(f"-J{flag}" for flag in FLAGS[:5]), "-nowarn", "-encoding", "UTF-8",
                 "-d", out, *(["-cp", classpath] if classpath and kind != "io" else []), *sources]
        stamp = f"{kind}.built"
        done = compile(["sh", "-c", f'"$@" && : > {stamp}', "javac", *javac], stamp, max(memory_mb, 1536))
        if isinstance(done, str):
            return Built(error=done)
        os.close(done)
        import io  # a Java job's only: the executor's warm parent stays small
        import zipfile

        jar = io.BytesIO()
        with zipfile.ZipFile(jar, "w", zipfile.ZIP_STORED) as z:
            for root, _, names in os.walk(out):
                for name in sorted(names):
                    path = os.path.join(root, name)
                    z.write(path, os.path.relpath(path, out))
        return Built(aux=seal(jar.getvalue(), f"{kind}.jar"))

    def command(self, job, kind, built, memory_mb):
        java = "/usr/bin/java" if os.path.exists("/usr/bin/java") else "java"
        classpath = "/proc/self/fd/6" + (":" + WARM if os.path.isdir(WARM) else "")
        heap = max(32, memory_mb - self.headroom_mb)
        argv = [java, f"-Xmx{heap}m", *FLAGS, "-cp", classpath]
        return argv + ([main_class(job["program"])] if kind == "io" else ["grpo.GrpoHarness"]), java

    def what(self, job, state, index):
        test = job["tests"][index]
        if test["kind"] == "script":
            i = state["positions"][index]
            return {"main": f"grpo_t{i}." + main_class(job["program"] + "\n" + test["code"])}
        classes = [f"grpo_call.{m.group(1)}" for m in _CLASS.finditer(job["program"])]
        return {"fn": test["fn"], "args": test.get("args", []), "classes": classes}

    def warm(self) -> None:
        import subprocess

        subprocess.run(["javac", "-d", WARM, os.path.join(HARNESS_DIR, "GrpoHarness.java")], check=True)
