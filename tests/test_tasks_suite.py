"""Suites: schema validation with file/line/field errors, loading, splits, adapters, prompts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from conftest import BENCH
from grpo_code.errors import MissingFileError, SandboxError, SuiteError
from grpo_code.sandbox.types import CallTest, Limits, LimitsError, ScriptTest
from grpo_code.tasks import Task, adapters, load_suite, render, write_suite
from grpo_code.tasks.records import Conversion, Unreadable, UnreadableRecordsError
from grpo_code.tasks.suite import converted_tasks, suite_from_records

HUMANEVAL = BENCH / "humaneval" / "HumanEval.jsonl.gz"
MBPP = BENCH / "mbpp" / "mbpp.jsonl"
MBPP_SANITIZED = BENCH / "mbpp" / "sanitized-mbpp.json"

GOOD = {"id": "x/1", "prompt": "Write `f()` returning 1.", "entry_point": "f",
        "tests": [{"kind": "call", "fn": "f", "args": [], "expected": 1}], "reference": "def f():\n    return 1\n",
        "metadata": {"split": "train"}}


def make_suite(tmp_path: Path, lines: list[str], meta: str = "name: mine\nlanguage: python\n") -> Path:
    d = tmp_path / "mine"
    d.mkdir(exist_ok=True)
    (d / "suite.yaml").write_text(meta)
    (d / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    return d


def test_demo_suite_is_bundled_and_valid() -> None:
    suite = load_suite("demo")
    assert 40 <= len(suite) <= 80
    assert set(suite.splits) == {"train", "test"}
    for task in suite.tasks:
        assert task.reference and len(task.tests) >= 3, task.id
        assert task.language == "python" and task.mode == "instruct"
    assert len(suite.split("train")) + len(suite.split("test")) == len(suite)


def test_suite_loads_and_splits(tmp_path: Path) -> None:
    other = dict(GOOD, id="x/12", metadata={"split": "test"})
    suite = load_suite(str(make_suite(tmp_path, [json.dumps(GOOD), json.dumps(other)])))
    assert suite.name == "mine" and len(suite) == 2
    assert [t.id for t in suite.split("test").tasks] == ["x/12"]
    assert [t.id for t in suite.split("10-20").tasks] == ["x/12"]
    assert len(suite.split("all")) == 2
    with pytest.raises(SuiteError, match="no tasks in split 'valid' \\(its splits: test, train\\)"):
        suite.split("valid")
    assert isinstance(suite.tasks[0].tests[0], CallTest)


def test_content_hash_changes_with_content(tmp_path: Path) -> None:
    a = load_suite(str(make_suite(tmp_path, [json.dumps(GOOD)])))
    changed = dict(GOOD, tests=[{"kind": "call", "fn": "f", "args": [], "expected": 2}])
    b = load_suite(str(make_suite(tmp_path, [json.dumps(changed)])))
    assert a.content_hash() != b.content_hash() and len(a.content_hash()) == 16


@pytest.mark.parametrize(
    "line, needle",
    [
        ({k: v for k, v in GOOD.items() if k != "prompt"}, "tasks.jsonl:2: prompt: missing"),
        (dict(GOOD, tests=[{"kind": "shell", "cmd": "true"}]), "tasks.jsonl:2: tests[0].kind is 'shell'"),
        (dict(GOOD, language="cobol"), "tasks.jsonl:2: language: 'cobol' is not supported"),
        (dict(GOOD, mode="chat"), "tasks.jsonl:2: mode: 'chat' is invalid"),
        (dict(GOOD, tests=[]), "tasks.jsonl:2: tests: must be a non-empty list"),
        (dict(GOOD, colour="red"), "tasks.jsonl:2: colour: unknown field"),
        (dict(GOOD, limits={"timeout_s": -1}), "tasks.jsonl:2: limits.timeout_s: -1 must be seconds"),
        ({k: v for k, v in GOOD.items() if k != "reference"} | {"tests": [{"kind": "call", "fn": "f", "args": []}]},
         "tasks.jsonl:2: tests[0]: has no expected value, and the task has no reference"),
        (dict(GOOD, tests=[{"kind": "call", "fn": "f", "args": [], "expected": 1, "checker": "c"}]),
         "tasks.jsonl:2: tests[0].checker: 'c' is not in the task's checkers"),
        ("{not json", "tasks.jsonl:2: not valid JSON"),
        (GOOD, "tasks.jsonl:2: id: 'x/1' already used on line 1"),
    ],
)
def test_bad_records_name_file_line_and_field(tmp_path: Path, line, needle: str) -> None:
    text = line if isinstance(line, str) else json.dumps(line)
    with pytest.raises(SuiteError) as info:
        load_suite(str(make_suite(tmp_path, [json.dumps(GOOD), text])))
    assert needle in str(info.value)


def test_bad_suite_yaml(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="splits: unknown key"):
        load_suite(str(make_suite(tmp_path, [json.dumps(GOOD)], meta="splits: {}\n")))
    with pytest.raises(SuiteError, match="invalid YAML"):
        load_suite(str(make_suite(tmp_path, [json.dumps(GOOD)], meta="a: [\n")))


SKIPPED = "skipped:\n- {index: 3, id: '42', field: 'test_list[0].input', reason: ambiguous}\n"


def test_suite_yaml_lists_skipped_records(tmp_path: Path) -> None:
    suite = load_suite(str(make_suite(tmp_path, [json.dumps(GOOD)], meta=SKIPPED + "- {index: 5, id: null, "
                                      "field: prompt, reason: missing}\n")))
    assert suite.skipped == (Unreadable(3, "42", "test_list[0].input", "ambiguous"),
                             Unreadable(5, None, "prompt", "missing"))
    write_suite(suite, tmp_path / "copy")
    assert load_suite(str(tmp_path / "copy")).skipped == suite.skipped
    assert load_suite(str(make_suite(tmp_path, [json.dumps(GOOD)], meta="name: mine\n"))).skipped == ()


@pytest.mark.parametrize("meta, needle", [
    ("skipped: 3\n", "suite.yaml: skipped: is int, expected a list"),
    ("skipped: [oops]\n", "suite.yaml: skipped[0]: is str, expected a mapping"),
    (SKIPPED.replace("reason:", "why:"), "suite.yaml: skipped[0].why: unknown key (known: index, id, field, reason)"),
    (SKIPPED.replace("index: 3", "index: -1"), "suite.yaml: skipped[0].index: -1 is not a record number"),
    (SKIPPED.replace("id: '42'", "id: [4]"), "suite.yaml: skipped[0].id: [4] is not a record id"),
    (SKIPPED.replace(", reason: ambiguous", ""), "suite.yaml: skipped[0].reason: None is not a non-empty string"),
])
def test_bad_skipped_entries_name_the_field(tmp_path: Path, meta: str, needle: str) -> None:
    with pytest.raises(SuiteError) as info:
        load_suite(str(make_suite(tmp_path, [json.dumps(GOOD)], meta=meta)))
    assert needle in str(info.value)


def test_adapters_report_every_unreadable_record(tmp_path: Path) -> None:
    src = tmp_path / "p.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in (
        {"id": "a", "question": "q", "inputs": ["1\n"], "outputs": []},
        {"id": "ok", "question": "q", "inputs": ["1\n"], "outputs": ["1\n"]},
        {"id": "c", "inputs": ["1\n"], "outputs": ["1\n"]})))
    with pytest.raises(UnreadableRecordsError) as info:
        load_suite(f"stdio:{src}")  # a FORMAT:PATH suite stays strict
    assert str(info.value).startswith("2 of 3 records cannot be read: p.jsonl[0] (a): outputs: 1 inputs but 0 "
                                      "outputs; p.jsonl[2] (c): prompt: problem text missing")
    assert "--skip-invalid" in info.value.hint
    conversion = adapters.convert_all("stdio", str(src))
    assert [t["id"] for t in conversion.tasks] == ["ok"] and conversion.indices == (1,) and conversion.total == 3
    assert [(p.index, p.id, p.field) for p in conversion.skipped] == [(0, "a", "outputs"), (2, "c", "prompt")]


def test_converted_tasks_skip_invalid_and_duplicate_tasks() -> None:
    bad = dict(GOOD, id="x/2", tests=[{"kind": "fuzz"}])
    conversion = Conversion((GOOD, bad, GOOD), (0, 2, 3), (Unreadable(1, None, "prompt", "missing"),))
    tasks, skipped = converted_tasks(conversion, "f.jsonl")
    assert [t.id for t in tasks] == ["x/1"]
    assert [(p.index, p.id, p.field) for p in skipped] == [(1, None, "prompt"), (2, "x/2", "(converted task)"),
                                                           (3, "x/1", "id")]
    assert skipped[1].reason.startswith("tests[0].kind is 'fuzz'") and skipped[2].reason.endswith("of record 0")


def test_unknown_suite_lists_what_exists() -> None:
    with pytest.raises(SuiteError, match="unknown suite 'nope' \\(bundled/configured: .*demo"):
        load_suite("nope")


def test_suite_limits_are_task_defaults(tmp_path: Path) -> None:
    d = make_suite(tmp_path, [json.dumps(GOOD), json.dumps(dict(GOOD, id="x/2", limits={"timeout_s": 1}))],
                   meta="limits: {timeout_s: 7, memory_mb: 256}\n")
    a, b = load_suite(str(d)).tasks
    assert (a.limits.timeout_s, a.limits.memory_mb) == (7.0, 256)
    assert (b.limits.timeout_s, b.limits.memory_mb) == (1.0, 256)


def test_write_then_load_round_trips(tmp_path: Path) -> None:
    suite = load_suite("demo")
    write_suite(suite, tmp_path / "copy")
    again = load_suite(str(tmp_path / "copy"))
    assert again.content_hash() == suite.content_hash()


def test_adapter_callable_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_tasks.py").write_text(
        "def tasks():\n    return [" + repr(GOOD) + "]\n\ndef broken():\n    return [{'id': 'a'}]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert [t.id for t in load_suite("my_tasks:tasks").tasks] == ["x/1"]
    with pytest.raises(SuiteError, match=r"my_tasks:broken\[0\]: prompt: missing"):
        load_suite("my_tasks:broken")
    with pytest.raises(SuiteError, match="cannot import 'no_such_module'"):
        load_suite("no_such_module:tasks")


# ----------------------------------------------------------------- adapters on real files


def test_humaneval_adapter(benchmarks: Path) -> None:
    suite = load_suite(f"humaneval:{HUMANEVAL}")
    assert len(suite) == 164 and suite.mode == "complete"
    t = suite.get("HumanEval/0")
    assert t.entry_point == "has_close_elements"
    assert t.reference.startswith(t.prompt)
    assert t.tests[0].code.rstrip().endswith("check(has_close_elements)")


def test_mbpp_adapters_and_customary_splits(benchmarks: Path) -> None:
    full = load_suite(f"mbpp:{MBPP}")
    assert len(full) == 974
    assert full.splits == {"prompt": 10, "test": 500, "validation": 90, "train": 374}
    t = full.get("Mbpp/11")
    assert t.entry_point == "remove_Occ" and len(t.tests) == 3
    assert "Your code should pass this test:\nassert remove_Occ(" in t.prompt
    assert len(full.split("11-510")) == 500
    sanitized = load_suite(f"mbpp:{MBPP_SANITIZED}")
    assert len(sanitized) == 427
    with_imports = [t for t in sanitized.tasks if t.tests[0].code.startswith("import")]
    assert with_imports, "test_imports must be prepended to the tests"


def test_stdio_adapter(tmp_path: Path) -> None:
    apps = {"problem_id": 7, "question": "Read two ints, print their sum.",
            "input_output": json.dumps({"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]}),
            "solutions": json.dumps(["a, b = map(int, input().split())\nprint(a + b)\n"])}
    contests = {"name": "sum", "description": "Sum two ints.",
                "public_tests": {"input": ["1 1\n"], "output": ["2\n"]},
                "private_tests": {"input": ["2 2\n"], "output": ["4\n"]},
                "solutions": {"language": [2, 3], "solution": ["cpp code", "print(sum(map(int, input().split())))"]}}
    src = tmp_path / "p.jsonl"
    src.write_text(json.dumps(apps) + "\n" + json.dumps(contests) + "\n")
    suite = load_suite(f"stdio:{src}")
    a, b = suite.tasks
    assert a.id == "7" and [t.stdout for t in a.tests] == ["3\n", "7\n"] and a.reference.startswith("a, b")
    assert b.id == "sum" and len(b.tests) == 2 and b.reference.startswith("print(sum")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "inputs": ["1"], "outputs": []}) + "\n")
    with pytest.raises(SuiteError, match="1 inputs but 0 outputs"):
        load_suite(f"stdio:{bad}")


def test_call_adapter(tmp_path: Path) -> None:
    taco = {"id": "t1", "question": "Double it.",
            "input_output": {"fn_name": "double", "inputs": [[1], [5]], "outputs": [[2], [10]]}}
    src = tmp_path / "c.json"
    src.write_text(json.dumps([taco]))
    plain = load_suite(f"call:{src}").tasks[0]
    assert plain.tests[0].expected == [2]
    unwrapped = adapters.call(adapters.read_records(str(src)), unwrap_outputs=True)
    assert unwrapped[0]["tests"][1] == {"kind": "call", "fn": "double", "args": [5], "expected": 10}


def test_parquet_input(tmp_path: Path, benchmarks: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = adapters.read_records(str(MBPP))[:5]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "m.parquet")
    assert len(load_suite(f"mbpp:{tmp_path / 'm.parquet'}")) == 5


def test_missing_input_file() -> None:
    with pytest.raises(MissingFileError):
        adapters.convert("mbpp", "/nonexistent/file.jsonl")


def test_wrong_format_for_file(benchmarks: Path) -> None:
    with pytest.raises(SuiteError, match=r"mbpp.jsonl\[0\] \(1\): mbpp records, not humaneval: use the mbpp adapter"):
        adapters.convert("humaneval", str(MBPP))


# ----------------------------------------------------------------- prompts


def test_chat_prompt_asks_for_one_fenced_block() -> None:
    task = load_suite("demo").tasks[0]
    p = render(task, "chat")
    assert [m["role"] for m in p.messages] == ["system", "user"]
    assert task.prompt in p.messages[1]["content"] and "```python" in p.messages[1]["content"]
    assert render(task, "chat") == p  # deterministic
    custom = render(task, "chat", system_prompt="Be brief.", prompt_template="Task: {prompt}")
    assert custom.for_trl() == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": f"Task: {task.prompt}"}]
    assert [m["role"] for m in render(task, "chat", system_prompt="").messages] == ["user"]


def test_raw_prompts() -> None:
    complete = Task("c", "def f():\n", (ScriptTest("assert f() is None"),), mode="complete")
    assert render(complete, "raw").for_trl() == "def f():\n"
    instruct = Task("i", "Write f.", (ScriptTest("assert f()"),))
    assert render(instruct, "raw").text.endswith("```python\n")


def test_bad_template_is_a_user_error() -> None:
    task = load_suite("demo").tasks[0]
    with pytest.raises(SuiteError, match="cannot be filled"):
        render(task, "chat", prompt_template="{question}")
    with pytest.raises(SuiteError, match="unknown prompt style"):
        render(task, "fancy")


def test_records_from_python() -> None:
    suite = suite_from_records("inline", [GOOD], "inline")
    assert suite.tasks[0].tests[0] == CallTest(fn="f", args=(), expected=1)


def test_a_huge_integer_literal_names_its_line(tmp_path: Path) -> None:
    big = dict(GOOD, tests=[{"kind": "call", "fn": "f", "args": [], "expected": 1}])
    text = json.dumps(big).replace('"expected": 1', '"expected": ' + "9" * 5000)
    with pytest.raises(SuiteError) as info:
        load_suite(str(make_suite(tmp_path, [json.dumps(GOOD), text])))
    assert "tasks.jsonl:2" in str(info.value) and "$i" in info.value.hint


def test_oracle_tests_need_a_reference_and_fill_from_it(tmp_path: Path, tmp_cache: Path) -> None:
    from grpo_code.config import SandboxConfig
    from grpo_code.sandbox import Sandbox
    from grpo_code.verify import oracle

    record = {"id": "o/1", "prompt": "Write f(x) returning (x, {x}).", "entry_point": "f",
              "reference": "def f(x):\n    return (x, {x})\n",
              "tests": [{"kind": "call", "fn": "f", "args": [2]}, {"kind": "call", "fn": "f", "args": ["a"]},
                        {"kind": "call", "fn": "f", "args": [5], "expected": {"$t": [5, {"$s": [5]}]}}]}
    broken = {"id": "o/2", "prompt": "p", "entry_point": "g", "reference": "def g(x):\n    return 1 // x\n",
              "tests": [{"kind": "call", "fn": "g", "args": [1]}, {"kind": "call", "fn": "g", "args": [0]}]}
    suite = load_suite(str(make_suite(tmp_path, [json.dumps(record), json.dumps(broken)])))
    with pytest.raises(SuiteError, match="not computed"):
        suite.get("o/1").job("x")
    with Sandbox(SandboxConfig(backend="local", workers=1)) as sandbox:
        resolved, failed = oracle.resolve(suite, sandbox)
        [task] = resolved.tasks
        assert [t.expected for t in task.tests] == [{"$t": [2, {"$s": [2]}]}, {"$t": ["a", {"$s": ["a"]}]},
                                                     {"$t": [5, {"$s": [5]}]}]
        assert "o/2" in failed and "test 1" in failed["o/2"] and "ZeroDivisionError" in failed["o/2"]
        [ok, wrong] = sandbox.run([task.job(task.reference), task.job("def f(x):\n    return [x, [x]]\n")])
        assert ok.status.value == "pass" and wrong.passed == 0
        assert list(oracle.oracle_dir().glob(f"*.{oracle.FORMAT}"))  # cached: the next resolve runs nothing
        again, _ = oracle.resolve(suite, sandbox)
        assert again.tasks[0] == task


@contextmanager
def resolved_twice(tmp_path: Path, record: dict) -> Iterator[tuple[Task, Task, Any]]:
    """A one-task suite's oracle run fresh, then from its cache: both tasks and the (local) sandbox."""
    from grpo_code.config import SandboxConfig
    from grpo_code.sandbox import Sandbox
    from grpo_code.verify import oracle

    suite = load_suite(str(make_suite(tmp_path, [json.dumps(record)])))
    with Sandbox(SandboxConfig(backend="local", workers=1)) as sandbox:
        [fresh] = oracle.resolve(suite, sandbox)[0].tasks
        [cached] = oracle.resolve(suite, sandbox)[0].tasks
        yield fresh, cached, sandbox


def test_the_oracle_keeps_the_digests_of_large_values_it_stored(tmp_path: Path, tmp_cache: Path) -> None:
    """A large expected value's digest is stored with it: a cached resolve encodes the tests
    as a fresh one does (same store key, same held-back tests) without writing the value out."""
    from grpo_code.sandbox.encoded import encode_tests

    record = {"id": "big/1", "prompt": "Write f(n).", "entry_point": "f",
              "reference": "def f(n):\n    return list(range(n))\n",
              "tests": [{"kind": "call", "fn": "f", "args": [20000]}, {"kind": "call", "fn": "f", "args": [3]}]}
    with resolved_twice(tmp_path, record) as (fresh, cached, sandbox):
        assert cached.resolved.large_expected == fresh.encoded_tests.large and list(fresh.encoded_tests.large) == [0]
        plain = encode_tests(cached.tests)
        assert cached.encoded_tests.digest == fresh.encoded_tests.digest == plain.digest
        assert cached.encoded_tests.held.text == plain.held.text and "expected_held" in plain.held.texts[0]
        assert cached.encoded_tests.texts == plain.texts and '"expected": [0, 1, 2' in plain.texts[0]
        [ok] = sandbox.run([cached.job(cached.reference)])
        assert ok.status.value == "pass"


def test_the_oracle_cache_keeps_under_its_cap_by_dropping_the_least_recently_used(
        tmp_path: Path, tmp_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import time

    from grpo_code.errors import GrpoCodeError
    from grpo_code.verify import oracle

    assert oracle.cache_limit() == 2048 << 20
    for bad in ("lots", "-1", "1.5"):
        monkeypatch.setenv(oracle.CACHE_MB_ENV, bad)
        with pytest.raises(GrpoCodeError, match=oracle.CACHE_MB_ENV):
            oracle.cache_limit()
    folder = oracle.oracle_dir()
    folder.mkdir(parents=True)
    now = time.time()
    ages = {"kept": 900, "older": 500, "newer": 100, "torn.partial": 2 * oracle.PARTIAL_GRACE_S,
            "writing.partial": 10}
    for name, age in ages.items():
        (folder / name).write_bytes(b"x" * 1000)
        os.utime(folder / name, (now - age, now - age))
    # 5000 bytes, cap 3000: the torn write and the older file go; the kept one (the suite being
    # resolved) and another process's write in progress never do
    assert oracle.prune({folder / "kept"}, 3000) == 2000
    assert sorted(p.name for p in folder.iterdir()) == ["kept", "newer", "writing.partial"]
    assert oracle.prune(set(), 10**6) == 0
    (folder / "a-folder").mkdir()  # not a cache file: neither counted nor removed
    assert oracle.prune(set(), 0) == 2000 and sorted(p.name for p in folder.iterdir()) == ["a-folder", "writing.partial"]
    (folder / "a-folder").rmdir()

    # resolve prunes after it stores, and a cache hit counts as a use
    monkeypatch.setenv(oracle.CACHE_MB_ENV, "0")
    record = {"id": "c/1", "prompt": "Write f(n).", "entry_point": "f", "reference": "def f(n):\n    return n\n",
              "tests": [{"kind": "call", "fn": "f", "args": [1]}]}
    with resolved_twice(tmp_path, record) as (fresh, cached, _):
        assert fresh.tests[0].expected == cached.tests[0].expected == 1
    [stored] = [p for p in folder.iterdir() if p.name not in ("writing.partial",)]
    assert stored.name.endswith(oracle.FORMAT) and now - stored.stat().st_mtime < 60


def test_reference_factor_sets_the_time_limit_from_the_references_slowest_test(tmp_path: Path,
                                                                                tmp_cache: Path) -> None:
    """evalplus's rule, per task: factor x the reference's slowest test, at least 1 s, at most
    ``timeout_s``; the same from a cached oracle; a program that loops stops there."""
    import time

    limits = Limits.from_dict({"timeout_s": 10, "reference_factor": 4})
    assert limits.from_reference(0.001) == Limits(1.0, None) and limits.from_reference(1.5) == Limits(6.0, None)
    assert limits.from_reference(30) == Limits(10.0, None) and Limits(reference_factor=2).from_reference(8) == Limits(16.0)
    assert Limits().over(limits) == limits and Limits(timeout_s=3).from_reference(100) == Limits(timeout_s=3)
    with pytest.raises(LimitsError, match="reference_factor"):
        Limits.from_dict({"reference_factor": 0})
    record = {"id": "r/1", "prompt": "Write f(n).", "entry_point": "f", "limits": {"timeout_s": 10, "reference_factor": 4},
              "reference": "def f(n):\n    return sum(range(n))\n",
              "tests": [{"kind": "call", "fn": "f", "args": [10]}, {"kind": "call", "fn": "f", "args": [1000]}]}
    with resolved_twice(tmp_path, record) as (fresh, cached, sandbox):
        assert fresh.limits == cached.limits == Limits(1.0, None)  # a quick reference: the 1 s floor
        started = time.monotonic()
        [looped] = sandbox.run([cached.job("def f(n):\n    while True:\n        pass\n")])
        assert looped.tests[0].verdict.value == "timeout" and time.monotonic() - started < 8


def test_reference_factor_is_refused_where_no_oracle_applies_it(tmp_path: Path) -> None:
    """A factor of the reference's time means nothing without an oracle run: a task that
    writes its expected values out, or a job file, refuses it instead of ignoring it."""
    from grpo_code.sandbox.types import Job
    from grpo_code.tasks.schema import task_from_dict

    written = {"id": "w", "prompt": "p", "entry_point": "f", "reference": "def f(x):\n    return x\n",
               "limits": {"reference_factor": 4}, "tests": [{"kind": "call", "fn": "f", "args": [1], "expected": 1}]}
    with pytest.raises(SuiteError, match=r"line 3: limits.reference_factor: .*use limits.timeout_s"):
        task_from_dict(written, "line 3")
    with pytest.raises(SuiteError, match="convert it again"):  # a suite converted before the rule
        task_from_dict({**written, "metadata": {"source": "mbpp+"}}, "line 3")
    # suite.yaml's factor is a default for its oracle tasks: the others go without it
    from_suite = task_from_dict({**written, "limits": None}, "line 3", default_limits=Limits(5, None, 4))
    assert from_suite.limits == Limits(5, None, None)
    oracle = {**written, "tests": [{"kind": "call", "fn": "f", "args": [1]}]}
    task = task_from_dict(oracle, "line 3")
    assert task.limits.reference_factor == 4
    assert task.job("def f(x):\n    return x\n", record=True).limits.reference_factor is None  # the oracle's run
    job = Job("x = 1\n", (ScriptTest(""),)).to_dict()
    with pytest.raises(SandboxError, match="limits.reference_factor is for task suites"):
        Job.from_dict({**job, "limits": {"timeout_s": 5, "reference_factor": 4}})


def test_isolation_and_stop_on_failure_reach_the_job() -> None:
    from grpo_code.tasks.schema import task_from_dict

    record = {"id": "t", "prompt": "p", "entry_point": "f", "isolation": "test",
              "tests": [{"kind": "call", "fn": "f", "args": [1], "expected": 1}]}
    task = task_from_dict(record, "line 1")
    assert task.to_dict()["isolation"] == "test"
    job = task.job("def f(x):\n    return x\n", stop_on_failure=True)
    assert (job.isolation, job.stop_on_failure) == ("test", True)
    assert task.job("", record=True, stop_on_failure=True).stop_on_failure is False  # an oracle runs every test
    assert task.job("").to_dict()["tests"] == [t.to_dict() for t in task.tests]
    default = task_from_dict({**record, "isolation": "job"}, "line 1")
    assert "isolation" not in default.to_dict() and default.job("").isolation == "job"
    with pytest.raises(SuiteError, match="isolation"):
        task_from_dict({**record, "isolation": "process"}, "line 1")


def test_what_the_oracle_resolved_is_a_declared_field_a_replaced_copy_drops() -> None:
    """``fill`` records the task's hash as written and its large values' digests in the
    declared ``resolved`` field; a ``dataclasses.replace`` copy (other tests, another
    prompt) has none, so it never carries digests indexed by tests it no longer has."""
    import dataclasses

    from grpo_code.sandbox.types import testcase_from_dict
    from grpo_code.tasks.schema import Task
    from grpo_code.verify.oracle import fill

    task = Task("t/1", "Write f.", (testcase_from_dict({"kind": "call", "fn": "f", "args": [1]}),
                                   testcase_from_dict({"kind": "call", "fn": "f", "args": [2]})),
                entry_point="f", reference="def f(x):\n    return x\n")
    filled = fill(task, {0: 1, 1: 2}, large={1: "digest"})
    assert filled.resolved is not None and filled.resolved.large_expected == {1: "digest"}
    assert filled.content_hash() == task.content_hash() and filled == dataclasses.replace(filled)
    hidden = dataclasses.replace(filled, tests=filled.tests[:1])
    assert hidden.resolved is None and hidden.content_hash() != task.content_hash()
    assert "resolved" not in {f.name for f in dataclasses.fields(Task) if f.init}
