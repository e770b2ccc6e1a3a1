"""HumanEval-X's references judged by the sandbox and by each language's own toolchain.

Used by ``scripts/bench_languages.py --humaneval-x DIR``. The native side writes, for each
task, the test file HumanEval-X's harness (CodeGeeX's ``evaluate_humaneval_x.py``) writes:
prompt, canonical solution and test in one file (Go's with its ``test_setup`` and the
standard packages the solution names; Rust's with its declaration and an empty ``main``),
and runs the toolchain on it in a fresh process: ``python3``, ``node``, ``javac`` + ``java``,
``go test``, and ``g++``/``rustc`` with the flags the sandbox compiles with (C++17 -O2;
Rust edition 2021 at opt-level 1, the image's crates for those the file names). They run
in one container of the language's image, as root, with no limits and as many at once as
the sandbox has workers; the clock is read inside the container, so the container's start
is not counted. A warm-up program runs first on both sides (Go's build cache, the pool).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grpo_code.config import SandboxConfig
from grpo_code.sandbox import Sandbox, Status
from grpo_code.sandbox.executor.rust import CRATE_DIR, CRATES, without_unused_crates
from grpo_code.sandbox.image import image_name
from grpo_code.tasks import adapters
from grpo_code.tasks.suite import converted_tasks

FILES = {"python": "python", "cpp": "cpp", "go": "go", "java": "java", "javascript": "js", "rust": "rust"}
"""Our language name -> the suffix of HumanEval-X's file (``humaneval_<suffix>.jsonl.gz``)."""

PY_IMPORTS = ("import math", "import re", "import sys", "import copy", "import datetime", "import itertools",
              "import collections", "import heapq", "import statistics", "import functools", "import hashlib",
              "import numpy", "import numpy as np", "import string", "from typing import *",
              "from collections import *")
CPP_INCLUDES = ("#include<stdlib.h>", "#include<algorithm>", "#include<math.h>", "#include<stdio.h>",
                "#include<vector>", "#include<string>", "#include<climits>", "#include<cstring>", "#include<iostream>")
GO_PACKAGES = ("math", "strings", "fmt", "strconv", "time", "bytes", "regexp", "sort", "math/rand", "crypto/md5")
"""The imports HumanEval-X's harness adds (its ``IMPORT_HELPER``)."""

GO_ENV = "GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=/b/gocache CGO_ENABLED=0"


def native(language: str, r: dict) -> tuple[str, str, str]:
    """(file name, its text, the shell command that builds and runs it) for record ``r``."""
    prompt, code, test = r["prompt"], r["canonical_solution"], r["test"]
    if language == "python":
        return "t.py", "\n".join(PY_IMPORTS) + "\n" + prompt + code + "\n" + test + "\n", "python3 t.py"
    if language == "cpp":
        head = "".join(line + "\n" for line in CPP_INCLUDES if line not in prompt)
        return "t.cpp", head + "\n" + prompt + code + "\n" + test, "g++ -std=c++17 -O2 -pipe t.cpp -o t && ./t"
    if language == "javascript":
        return "t.js", prompt + code + "\n" + test, "node t.js"
    if language == "java":
        return "Main.java", prompt + code + "\n" + test, "javac -nowarn -d . Main.java && java -cp . Main"
    if language == "go":
        setup = r["test_setup"]
        extra = [f'"{p}"' for p in GO_PACKAGES if p not in setup and p.split("/")[-1] + "." in code]
        imports = "import (\n" + "    ".join(p + "\n" for p in extra) + ")\n" if extra else ""
        text = setup + "\n" + imports + prompt.replace(r["import"], "") + code + "\n" + test
        return "main_test.go", text, f"{GO_ENV} go test -count=1 main_test.go"
    if language == "rust":
        text = without_unused_crates("\nfn main(){ \n } \n" + r["declaration"] + prompt + code + test)
        extern = "".join(f" --extern {c}=$(ls {CRATE_DIR}/lib{c}-*.rlib | head -1)" for c in CRATES if c in text)
        flags = f" -L dependency={CRATE_DIR}{extern}" if extern else ""
        return "t.rs", text, f"rustc --edition 2021 -C opt-level=1 --cap-lints allow --test{flags} t.rs -o t && ./t"
    raise ValueError(f"HumanEval-X has no {language}")


def run_native(language: str, records: list[dict], workers: int) -> tuple[float, int]:
    """Seconds to build and run every record's file with ``workers`` at once, and how many passed."""
    with tempfile.TemporaryDirectory(prefix="hx-native-") as tmp:
        root = Path(tmp)
        for i, r in enumerate([records[0], *records]):
            name, text, command = native(language, r)
            task = root / ("warm" if i == 0 else f"t{i:04d}")
            task.mkdir()
            (task / name).write_text(text)
            (task / "run.sh").write_text(f"cd {shlex.quote('/b/' + task.name)} && ( {command} ) >out.txt 2>err.txt\n"
                                         f"echo $? > /b/{task.name}/rc\n")
        (root / "all.sh").write_text(
            "mkdir -p /b/gocache\nsh /b/warm/run.sh\nstart=$(date +%s.%N)\n"
            f"ls -d /b/t[0-9]* | xargs -P {workers} -I{{}} sh {{}}/run.sh\n"
            "end=$(date +%s.%N)\necho \"$start $end\" > /b/clock\n")
        subprocess.run(["docker", "run", "--rm", "--user", "0", "--network", "none", "--entrypoint", "sh",
                        "-v", f"{root}:/b", image_name(language), "/b/all.sh"], check=True, capture_output=True)
        start, end = map(float, (root / "clock").read_text().split())
        # JavaScript's tests use console.assert, which only writes to stderr: HumanEval-X's
        # harness fails a program that wrote there, and so does this count.
        passed = sum(1 for d in root.glob("t[0-9]*") if (d / "rc").read_text().strip() == "0"
                     and (language != "javascript" or not (d / "err.txt").read_text(errors="replace").strip()))
        subprocess.run(["docker", "run", "--rm", "--user", "0", "--entrypoint", "sh", "-v", f"{root}:/b",
                        image_name(language), "-c", "chmod -R a+rwX /b"], check=True, capture_output=True)
    return end - start, passed


def run_sandbox(language: str, path: Path, workers: int, limit: int | None) -> tuple[float, int, int]:
    """Seconds the sandbox took to judge the converted file's references, how many passed, and
    how many there were."""
    tasks, _ = converted_tasks(adapters.convert_all("humaneval", str(path), language=language), str(path))
    jobs = [t.job(t.reference) for t in tasks[:limit] if t.reference]
    with Sandbox(SandboxConfig(backend="docker", workers=workers), quiet=True) as sandbox:
        sandbox.start(language)
        sandbox.run(jobs[:workers])
        start = time.perf_counter()
        results = sandbox.run(jobs)
        elapsed = time.perf_counter() - start
    return elapsed, sum(1 for r in results if r.status is Status.PASS), len(jobs)


def compare(folder: Path, languages: list[str], workers: int, limit: int | None, as_json: bool) -> int:
    rows = []
    for language in languages:
        if language not in FILES:
            print(f"error: HumanEval-X has no {language!r}; its languages: {', '.join(FILES)}", file=sys.stderr)
            return 2
        path = folder / f"humaneval_{FILES[language]}.jsonl.gz"
        if not path.is_file():
            print(f"error: {path} is missing; put HumanEval-X's files in {folder}", file=sys.stderr)
            return 2
        records = adapters.read_records(str(path))[:limit]
        ours, ours_pass, n = run_sandbox(language, path, workers, limit)
        bare, bare_pass = run_native(language, records, workers)
        rows.append({"language": language, "programs": n, "sandbox_pass": ours_pass, "native_pass": bare_pass,
                     "sandbox_per_s": round(n / ours, 2), "native_per_s": round(len(records) / bare, 2),
                     "ratio": round((n / ours) / (len(records) / bare), 2)})
        if as_json:
            print(json.dumps(rows[-1]), flush=True)
    if not as_json:
        print(f"workers {workers}; programs judged per second (build + every test), HumanEval-X references")
        print(f"{'language':11} {'programs':>8} {'pass (sandbox / native)':>24} {'sandbox/s':>10} {'native/s':>9} {'ratio':>6}")
        for row in rows:
            both = f"{row['sandbox_pass']} / {row['native_pass']}"
            print(f"{row['language']:11} {row['programs']:>8} {both:>24} {row['sandbox_per_s']:>10} "
                  f"{row['native_per_s']:>9} {row['ratio']:>6}")
    return 0
