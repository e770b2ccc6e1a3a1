"""HumanEval-X's native files (records in its shape, written here): Go's ``test_setup`` and
import quirks, Rust's doc-comment prompt with a declaration of crates, Python without an
``entry_point``; the converted tasks' references pass on docker and their empty programs fail."""

from __future__ import annotations

import json

import pytest

from conftest import need_image
from grpo_code.config import SandboxConfig
from grpo_code.sandbox import Job, Sandbox, Status
from grpo_code.sandbox.types import testcase_from_dict as case_from_dict
from grpo_code.tasks import adapters

GO = {
    "task_id": "Go/0",
    # imports math, which the solution does not use (Go refuses to build with an unused import)
    "prompt": 'import (\n    "math"\n)\n\n// Twice the number as text.\n// >>> Twice(2)\n// "4"\nfunc Twice(x int) string {\n',
    "import": 'import (\n    "math"\n)\n',
    "declaration": "\nfunc Twice(x int) string {\n",
    "canonical_solution": "    return strconv.Itoa(2 * x)\n}\n",  # strconv: not imported
    "test_setup": 'package main\n\nimport (\n    "testing"\n    "github.com/stretchr/testify/assert"\n)\n',
    "test": 'func TestTwice(t *testing.T) {\n    assert := assert.New(t)\n    assert.Equal("4", Twice(2))\n'
            '    assert.Equal(strconv.Itoa(-6), Twice(-3))\n}\n',
    "example_test": "",
}
RUST = {
    "task_id": "Rust/0",
    "prompt": "\n/*\n Twice the number.\n*/\n",
    "declaration": "\nuse std::{slice::Iter, cmp::{max, self}, collections::{HashSet, HashMap}};\nuse rand::Rng;\n"
                   "use regex::Regex;\nuse md5;\n\nfn twice(x: i32) -> i32{\n",
    "canonical_solution": "    2 * x\n}\n",
    "test": "\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn test_twice() {\n"
            "        assert_eq!(twice(2), 4);\n        let re = Regex::new(\"^[0-9]+$\").unwrap();\n"
            "        assert!(re.is_match(&twice(21).to_string()));\n    }\n\n/*\n    #[test]\n    fn test_old() {}\n*/\n}\n",
    "example_test": "",
}
PYTHON = {
    "task_id": "Python/0",
    "prompt": 'def twice(x):\n    """Twice x."""\n',
    "declaration": "def twice(x):\n",
    "canonical_solution": "    return 2 * x\n",
    "test": "\n\nMETADATA = {}\n\n\ndef check(twice):\n    assert twice(2) == 4\n    assert twice(-3) == -6\n\ncheck(twice)\n",
    "example_test": "",
}


def convert(tmp_path, record, language):
    path = tmp_path / f"humaneval_{language}.jsonl"
    path.write_text(json.dumps(record) + "\n")
    [task] = adapters.convert("humaneval", str(path), language=language)
    return task


def test_humaneval_x_records_convert_with_their_setup_and_declarations(tmp_path) -> None:
    go = convert(tmp_path, GO, "go")
    assert go["entry_point"] == "Twice" and go["tests"][0]["code"].startswith("package main")
    rust = convert(tmp_path, RUST, "rust")
    assert rust["entry_point"] == "twice" and rust["prompt"].rstrip().endswith("fn twice(x: i32) -> i32{")
    assert rust["reference"].endswith("    2 * x\n}\n")
    python = convert(tmp_path, PYTHON, "python")
    assert python["entry_point"] == "twice"


@pytest.fixture(scope="module")
def sandbox(docker_ready):
    for language in ("go", "rust"):
        need_image(language)
    with Sandbox(SandboxConfig(backend="docker", workers=2, timeout_s=5.0)) as sb:
        yield sb


@pytest.mark.docker
def test_humaneval_x_references_pass_and_empty_programs_fail(sandbox, tmp_path) -> None:
    jobs = []
    for record, language in ((GO, "go"), (RUST, "rust"), (PYTHON, "python")):
        task = convert(tmp_path, record, language)
        tests = tuple(case_from_dict(t) for t in task["tests"])
        jobs += [Job(task["reference"], tests, language=language), Job(task["prompt"], tests, language=language)]
    results = sandbox.run(jobs)
    assert [r.status for r in results[0::2]] == [Status.PASS] * 3, results[0::2]
    assert all(r.status is not Status.PASS for r in results[1::2]), results[1::2]
