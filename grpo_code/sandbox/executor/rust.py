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
import subprocess

from .base import HARNESS_DIR
from .toolchain import Built, Toolchain, compiled

_MAIN = re.compile(r"^(\s*(?:pub\s+)?)fn\s+main\s*\(", re.M)
_TEST_FN = re.compile(r"#\[test\]\s*((?:#\[[^\]]*\]\s*)*)(?:pub\s+)?fn\s+([A-Za-z_]\w*)")
_MOD = re.compile(r"^\s*(?:pub\s+)?mod\s+([A-Za-z_]\w*)\s*\{", re.M)
_CFG_TEST = re.compile(r"#\[cfg\(test\)\]")


def _harness() -> str:
    with open(os.path.join(HARNESS_DIR, "rust_wire.rs"), encoding="utf-8") as f:
        return f.read()


def program_part(program: str) -> str:
    """The program with its own ``main`` renamed (the harness's ``main`` runs the test)."""
    return "#![allow(warnings)]\n" + _MAIN.sub(r"\1#[allow(dead_code)] fn __grpo_program_main(", program, count=1)


def test_part(code: str, i: int) -> tuple[str, list[str]]:
    """Script test ``i`` as plain code and the paths of the functions it runs, in order."""
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
        return {"main.rs": program}

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
        argv = ["rustc", "--edition", "2021", "-C", f"opt-level={level}", "--cap-lints", "allow", "-o", f"{kind}.bin",
                source]
        return compiled(compile(argv, f"{kind}.bin"))

    def warm(self) -> None:
        subprocess.run(["rustc", "--version"], check=True)
