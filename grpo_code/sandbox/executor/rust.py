"""Rust (rustc, edition 2021, no cargo).

``io`` tests run the program built alone. Script tests are HumanEval-X's ``#[cfg(test)] mod
tests { #[test] fn ... }`` or MultiPL-E's ``fn main() { assert_eq!(...) }``: each becomes
plain functions (``#[test]`` functions made ``pub``, a ``main`` renamed) compiled with the
program and ``harness/rust_wire.rs`` into one binary whose ``main`` runs one test's functions
and reports; they run in the program's process (``attested: false``). Call tests compile the
program with the harness and a table that casts each named function to a function pointer
(``f as fn(_, _) -> _``): the arguments are decoded into its own parameter types and the
result encoded as data. A program's own ``main`` is renamed in both.
"""

from __future__ import annotations

import os
import re
from collections import Counter

from .base import HARNESS_DIR, write
from .toolchain import Built, Toolchain, compiled

CRATES = {"rand": "0.8", "regex": "1", "md5": "0.7"}
"""Crates HumanEval-X's Rust declarations and tests use, from Debian's crate sources."""
CRATE_DIR = "/opt/grpo-code/crates"
CRATE_BUILD_MB = 3072
"""Address space of a build that links the crates (rustc maps their metadata)."""
HARNESS_RLIB = "/opt/grpo-code/rust-harness/libgrpo_wire.rlib"
"""``harness/rust_wire.rs`` compiled once at image build: a test binary links it instead of
compiling its 340 lines again, which halves a HumanEval-X test's build."""

_MAIN = re.compile(r"^([ \t]*(?:pub\s+)?)fn\s+main\s*\(", re.M)
_TEST_FN = re.compile(r"#\[test\]\s*((?:#\[[^\]]*\]\s*)*)(?:pub\s+)?fn\s+([A-Za-z_]\w*)")
_MOD = re.compile(r"^[ \t]*(?:pub\s+)?mod\s+([A-Za-z_]\w*)\s*\{", re.M)
_CFG_TEST = re.compile(r"#\[cfg\(test\)\]")
_COMMENTS = re.compile(r"/\*(?:.*?\*/|.*\Z)|^[ \t]*//[^\n]*", re.S | re.M)


def _harness() -> str:
    """The harness module for a test binary: the image's compiled crate where there is one
    (:data:`HARNESS_RLIB`, linked by :meth:`RustRunner.build`), else its source."""
    if os.path.isfile(HARNESS_RLIB):
        return "use grpo_wire::__grpo;\n"
    with open(os.path.join(HARNESS_DIR, "rust_wire.rs"), encoding="utf-8") as f:
        return f.read()


_WORD = re.compile(r"[A-Za-z_]\w*")
_EXTERN_USE = re.compile(r"^[ \t]*use[ \t]+(?!(?:std|core|alloc|self|super|crate|rand|regex|md5)\b)([A-Za-z_]\w*)\b[^;]*;[ \t]*\n?", re.M)


def without_unused_crates(program: str) -> str:
    """The program without ``use`` lines of crates it does not otherwise name: rustc alone
    has no crates but the standard library, and HumanEval-X's Rust declarations open with
    ``use rand::Rng; use regex::Regex; use md5;`` whatever the solution uses."""
    # Linear in the program (the executor runs this on untrusted text): words counted once,
    # a line's own words subtracted, and no match attempted past the last ';'.
    seen = Counter(_WORD.findall(program))

    def drop(m: re.Match) -> str:
        own = Counter(_WORD.findall(m.group(0)))
        names = set(own) - {"use", "self", "as"}
        return m.group(0) if any(seen[name] > own[name] for name in names) else ""

    end = program.rfind(";") + 1
    return _EXTERN_USE.sub(drop, program[:end]) + program[end:]


def program_part(program: str) -> str:
    """The program with its own ``main`` renamed (the harness's ``main`` runs the test)."""
    program = without_unused_crates(program)
    return "#![allow(warnings)]\n" + _MAIN.sub(r"\1#[allow(dead_code)] fn __grpo_program_main(", program, count=1)


def test_part(code: str, i: int) -> tuple[str, list[str]]:
    """Script test ``i`` as plain code and the paths of the functions it runs, in order. Its
    comments go first (HumanEval-X's Rust/32 comments out its whole test module)."""
    code = _COMMENTS.sub("", code)
    code = _CFG_TEST.sub("", code)
    module = _MOD.search(code)
    prefix = ""
    if module is not None:
        prefix = f"__grpo_t{i}_{module.group(1)}::"
        code = code[:module.start()] + _MOD.sub(f"pub mod __grpo_t{i}_{module.group(1)} {{", code[module.start():], count=1)
    entries = []
    for match in _TEST_FN.finditer(code):
        inside = module is not None and match.start() > module.start()
        entries.append((prefix if inside else "") + match.group(2))
    code = _TEST_FN.sub(lambda m: f"{m.group(1)}pub fn {m.group(2)}", code)
    if _MAIN.search(code):
        code = _MAIN.sub(rf"\1fn __grpo_test_main_{i}(", code, count=1)
        entries.append(f"__grpo_test_main_{i}")
    return code, entries


SCRIPT_MAIN = """
fn main() {
    let payload = __grpo::Payload::read();
    let tests: &[&[fn()]] = &[%s];
    let index = payload.index();
    if index >= tests.len() { payload.report("runtime_error", &__grpo::Payload::message("no such test")); std::process::exit(1); }
    for test in tests[index] {
        if std::panic::catch_unwind(|| test()).is_err() {
            let text = __grpo::Payload::panicked();
            let event = if text.contains("assertion") { "assertion" } else { "runtime_error" };
            payload.report(event, &__grpo::Payload::message(&text));
            std::process::exit(1);
        }
    }
    payload.report("completed", "");
}
"""

CALL_MAIN = """
fn main() {
    let payload = __grpo::Payload::read();
    let (name, args) = payload.call();
    let answer = std::panic::catch_unwind(|| match name.as_str() {
%s        _ => Err(format!("no function {} in the table", name)),
    });
    match answer {
        Ok(Ok(value)) => payload.report("returned", &format!(", \\"value\\": {}", value)),
        Ok(Err(message)) => { payload.report("runtime_error", &__grpo::Payload::message(&message)); std::process::exit(1) }
        Err(_) => { payload.report("runtime_error", &__grpo::Payload::message(&__grpo::Payload::panicked())); std::process::exit(1) }
    }
}
"""


class RustRunner(Toolchain):
    language = "rust"
    tools = ("rustc",)
    memory_marks = (b"memory allocation of",)

    def io_files(self, program):
        return {"main.rs": without_unused_crates(program)}

    def script_files(self, program, codes):
        parts, tables = [program_part(program)], []
        for i, code in enumerate(codes):
            text, entries = test_part(code, i)
            parts.append(f"// test {i}\n{text}")
            tables.append("&[" + ", ".join(entries) + "]")
        parts += [_harness(), SCRIPT_MAIN % ", ".join(tables)]
        return {"script.rs": "\n".join(parts)}

    def call_files(self, program, fns):
        rows = "".join(f'        "{fn}" => __grpo::Call::call_json({fn} as fn({", ".join("_" * n)}) -> _, &args),\n'
                       for fn, n in fns.items())
        return {"call.rs": "\n".join([program_part(program), _harness(), CALL_MAIN % rows])}

    def build(self, kind, files, workdir, compile, memory_mb) -> Built:
        source = next(iter(files))
        level = "2" if kind == "io" else "1"
        crates = self.extern(files[source])
        harness = ["--extern", f"grpo_wire={HARNESS_RLIB}"] if kind != "io" and os.path.isfile(HARNESS_RLIB) else []
        argv = ["rustc", "--edition", "2021", "-C", f"opt-level={level}", "--cap-lints", "allow", *crates, *harness,
                "-o", f"{kind}.bin", source]
        return compiled(compile(argv, f"{kind}.bin", CRATE_BUILD_MB if crates else None))

    def extern(self, source: str) -> list[str]:
        """rustc's flags for the image's crates (:data:`CRATES`, compiled at image build) that
        ``source`` names: rustc reads every crate it is given, several hundred MiB for these."""
        named = [crate for crate in CRATES if re.search(rf"\b{crate}\b", source)]
        if not named or not os.path.isdir(CRATE_DIR):
            return []
        flags = ["-L", f"dependency={CRATE_DIR}"]
        for crate in named:
            found = sorted(f for f in os.listdir(CRATE_DIR) if f.startswith(f"lib{crate}-") and f.endswith(".rlib"))
            if found:
                flags += ["--extern", f"{crate}={os.path.join(CRATE_DIR, found[0])}"]
        return flags

    def warm(self) -> None:
        """Compile :data:`CRATES` from Debian's crate sources (cargo offline) into :data:`CRATE_DIR`,
        and the harness into :data:`HARNESS_RLIB`."""
        import shutil  # image build only: the executor's warm parent stays small
        import subprocess
        import tempfile
        subprocess.run(["rustc", "--version"], check=True)
        with tempfile.TemporaryDirectory() as work:
            deps = "".join(f'{crate} = "{version}"\n' for crate, version in CRATES.items())
            write(work, "Cargo.toml", '[package]\nname = "grpo_crates"\nversion = "0.1.0"\nedition = "2021"\n\n'
                                      f'[dependencies]\n{deps}\n[lib]\npath = "lib.rs"\n')
            write(work, "lib.rs", "")
            write(work, ".cargo/config.toml", '[source.crates-io]\nreplace-with = "debian"\n\n'
                                              '[source.debian]\ndirectory = "/usr/share/cargo/registry"\n')
            env = {**os.environ, "CARGO_HOME": os.path.join(work, ".cargo")}
            subprocess.run(["cargo", "build", "--release", "--offline"], cwd=work, env=env, check=True)
            os.makedirs(CRATE_DIR, exist_ok=True)
            built = os.path.join(work, "target", "release", "deps")
            for name in os.listdir(built):
                if name.endswith(".rlib") and not name.startswith("libgrpo_crates"):
                    shutil.copy(os.path.join(built, name), CRATE_DIR)
        os.makedirs(os.path.dirname(HARNESS_RLIB), exist_ok=True)
        subprocess.run(["rustc", "--edition", "2021", "-C", "opt-level=1", "--crate-type", "rlib", "--crate-name",
                        "grpo_wire", "-o", HARNESS_RLIB, os.path.join(HARNESS_DIR, "rust_wire.rs")], check=True)
