"""Dataset-side input that used to crash or balloon `tasks convert` (issue 57): each ends in
exit 2 with one line (or the record listed as unreadable), in bounded host memory and time.

The memory checks run the command in a child process and read its peak resident size; the
budget is what the CLI itself costs plus a margin, far below what the input unpacks to."""

from __future__ import annotations

import base64
import gzip
import json
import pickle
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grpo_code.cli import app
from grpo_code.tasks import packed as packed_tests
from grpo_code.tasks.records import MAX_INT_DIGITS, parse_json

runner = CliRunner()

DEEP = "[" * 100_000 + "]" * 100_000


def lcb(**change) -> dict:
    record = {"question_title": "t", "question_content": "Add.", "platform": "leetcode", "question_id": "1",
              "contest_id": "c", "contest_date": "2024-03-02T00:00:00", "difficulty": "easy",
              "starter_code": "class Solution:\n    def add(self, a, b):\n        ",
              "public_test_cases": json.dumps([{"input": "1\n2", "output": "3", "testtype": "functional"}]),
              "private_test_cases": "[]", "metadata": json.dumps({"func_name": "add"})}
    return {**record, **change}


def convert(tmp_path: Path, fmt: str, src: Path, *extra: str):
    return runner.invoke(app, ["tasks", "convert", fmt, str(src), str(tmp_path / "out"), "--force", *extra])


def one_line_error(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error: "), result.output
    assert "Traceback" not in result.output and "this is a bug" not in result.output
    for word in words:
        assert word in result.output, result.output


# VmHWM, not ru_maxrss: ru_maxrss carries the forking parent's size across exec.
_MEASURED = """import atexit, sys
out = sys.argv.pop(1)
def peak():
    kb = next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    open(out, "w").write(kb)
atexit.register(peak)
from grpo_code.cli import main
main()
"""


def peak_mb(tmp_path: Path, *args: str, env: dict | None = None) -> tuple[int, str, int]:
    """A CLI run in a child: its exit status, its output and its own peak resident MiB."""
    import os

    out = tmp_path / "peak_kb"
    done = subprocess.run([sys.executable, "-c", _MEASURED, str(out), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300)
    return done.returncode, done.stdout + done.stderr, int(out.read_text()) // 1024


def test_an_integer_past_the_digit_limit_is_read_or_refused_in_bounded_time(tmp_path: Path) -> None:
    # within the limit: read whole (a LiveCodeBench answer), and fast
    digits = "7" * 1_600_000
    t0 = time.perf_counter()
    value = parse_json(f"[{digits}]")[0]
    assert value % 10**12 == 777_777_777_777 and 10 ** (len(digits) - 1) < value < 10 ** len(digits)
    assert time.perf_counter() - t0 < 15  # about 2 s; int() of the same string took minutes
    # in a record's JSON line, past the limit: one line, exit 2
    src = tmp_path / "lcb.jsonl"
    src.write_text(json.dumps(lcb())[:-1] + f', "n": {"9" * (MAX_INT_DIGITS + 1)}}}\n')
    one_line_error(convert(tmp_path, "livecodebench", src), "lcb.jsonl:1", "digits")
    # in a functional test's input: that record is unreadable, the others convert
    big = json.dumps([{"input": f"{'8' * (MAX_INT_DIGITS + 5)}\n2", "output": "3", "testtype": "functional"}])
    src.write_text(json.dumps(lcb(question_id="2", public_test_cases=big)) + "\n" + json.dumps(lcb()) + "\n")
    t0 = time.perf_counter()
    result = convert(tmp_path, "livecodebench", src)
    assert time.perf_counter() - t0 < 30
    one_line_error(result, "digits")
    assert convert(tmp_path, "livecodebench", src, "--skip-invalid").exit_code == 0


def test_deeply_nested_json_is_an_unreadable_record_or_a_one_line_error(tmp_path: Path) -> None:
    src = tmp_path / "lcb.jsonl"
    src.write_text(json.dumps(lcb(public_test_cases=DEEP)) + "\n" + json.dumps(lcb(question_id="2")) + "\n")
    one_line_error(convert(tmp_path, "livecodebench", src), "nested too deeply")
    assert convert(tmp_path, "livecodebench", src, "--skip-invalid").exit_code == 0
    src.write_text(DEEP + "\n")  # a whole record
    one_line_error(convert(tmp_path, "livecodebench", src), "nested too deeply")
    # a suite whose tasks.jsonl is nested past the stack: `tasks show` says so in one line
    suite = tmp_path / "deep"
    suite.mkdir()
    (suite / "tasks.jsonl").write_text('{"id": "a", "prompt": "p", "tests": ' + DEEP + "}\n")
    one_line_error(runner.invoke(app, ["tasks", "show", str(suite)]), "nested too deeply")


def test_a_kodcode_test_file_that_overflows_the_parser_is_unreadable(tmp_path: Path) -> None:
    test = "from solution import f\n\ndef test_a():\n    assert f() == " + "-" * 100_000 + "1\n"
    src = tmp_path / "kc.jsonl"
    src.write_text(json.dumps({"question_id": "q", "question": "q", "test": test, "solution": "def f(): return 1"})
                   + "\n")
    one_line_error(convert(tmp_path, "kodcode", src), "cannot be parsed")


def test_codeforces_shards_with_a_bad_test_number_or_corrupt_bytes_are_one_line_errors(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from test_tasks_rl_sets import cf_record

    shards = tmp_path / "generated_tests"
    shards.mkdir()
    pq.write_table(pa.table({"problem_id": ["999/A"], "input": ["1\n"], "output": ["2\n"], "test_i": ["one"]}),
                   shards / "test_cases_0999.parquet")
    src = tmp_path / "cf.jsonl"
    src.write_text(json.dumps(cf_record(id="999/A", contest_id="999")) + "\n")
    one_line_error(convert(tmp_path, "codeforces", src, "--generated-tests", str(shards)), "test_i", "not an integer")
    (shards / "test_cases_0999.parquet").write_bytes(b"PAR1" + b"\x00" * 64 + b"PAR1")
    one_line_error(convert(tmp_path, "codeforces", src, "--generated-tests", str(shards)), "parquet")
    bad = tmp_path / "records.parquet"
    bad.write_bytes(b"PAR1 not really")
    one_line_error(convert(tmp_path, "codeforces", bad), "parquet")


def test_a_gzip_that_unpacks_to_gigabytes_is_refused_while_it_streams(tmp_path: Path) -> None:
    src = tmp_path / "bomb.jsonl.gz"
    with gzip.open(src, "wb", compresslevel=9) as fh:
        fh.write(b'{"question": "')
        chunk = b"a" * (1 << 20)
        for _ in range(1024):  # 1 GiB of text on one line, 1 MB on disk
            fh.write(chunk)
        fh.write(b'"}\n')
    assert src.stat().st_size < 4 << 20
    code, output, mb = peak_mb(tmp_path, "tasks", "convert", "livecodebench", str(src), str(tmp_path / "out"),
                               env={"GRPO_CODE_MAX_RECORD_MB": "64"})
    assert code == 2 and "over 64 MiB" in output, output
    assert mb < 600, f"peak {mb} MiB"


def test_a_packed_private_test_over_the_cap_is_refused_before_it_is_all_unpacked(tmp_path: Path,
                                                                              monkeypatch) -> None:
    big = json.dumps([{"input": "1\n" * (4 << 20), "output": "1", "testtype": "stdin"}])
    packed = base64.b64encode(zlib.compress(pickle.dumps(big), 9)).decode()
    monkeypatch.setattr(packed_tests, "MAX_UNPACKED", 1 << 20)
    src = tmp_path / "lcb.jsonl"
    src.write_text(json.dumps(lcb(private_test_cases=packed)) + "\n")
    one_line_error(convert(tmp_path, "livecodebench", src), "unpacks to more than 1 MiB")


def test_a_codeforces_row_of_a_problem_not_asked_for_is_never_materialised(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from test_tasks_rl_sets import cf_record

    shards = tmp_path / "generated_tests"
    shards.mkdir()
    huge = "9" * (300 << 20)
    table = pa.table({"problem_id": ["999/B", "999/A"], "input": [huge, "1\n"], "output": ["x", "2\n"],
                      "test_i": [0, 0]})
    # Without statistics a reader cannot skip the other problem's row group by its min/max.
    pq.write_table(table, shards / "test_cases_0999.parquet", row_group_size=1, write_statistics=False)
    del table, huge
    src = tmp_path / "cf.jsonl"
    src.write_text(json.dumps(cf_record(id="999/A", contest_id="999")) + "\n")
    code, output, mb = peak_mb(tmp_path, "tasks", "convert", "codeforces", str(src), str(tmp_path / "out"),
                               "--generated-tests", str(shards))
    assert code == 0, output
    assert mb < 600, f"peak {mb} MiB"
    tests = json.loads((tmp_path / "out" / "tasks.jsonl").read_text())["tests"]
    assert [t["stdin"] for t in tests][-1] == "1\n"


@pytest.mark.parametrize("solutions, reference", [
    ("class Solution:\n    pass\n", "class Solution:\n    pass\n"),  # rllm's LeetCode test file: one string
    (["class Solution:\n    pass\n"], "class Solution:\n    pass\n"),  # a list of programs
    (json.dumps(["class Solution:\n    pass\n"]), "class Solution:\n    pass\n"),  # a list as JSON text
    ([], None),
    ("", None),
])
def test_deepcoder_reads_each_shape_of_solutions(solutions, reference) -> None:
    from test_tasks_rl_sets import LEETCODE_CHECK

    from grpo_code.tasks.rl_sets import deepcoder

    [task] = deepcoder([{"id": 1, "problem": "p", "solutions": solutions,
                         "tests": json.dumps({"functional": LEETCODE_CHECK})}])
    assert task.get("reference") == reference


def test_packed_tests_stream_a_test_at_a_time(monkeypatch) -> None:
    """The packed text is parsed as it unpacks: the same tests as a whole parse, whatever the
    chunk size; one test over the per-test cap, a cut list or extra data are the record's."""
    from grpo_code.errors import SuiteError

    cases = [{"input": f"{i}\n" * 1000, "output": str(i), "testtype": "stdin"} for i in range(50)]

    def pack(value: object) -> str:
        return base64.b64encode(zlib.compress(pickle.dumps(value))).decode()

    monkeypatch.setattr(packed_tests, "CHUNK", 4096)
    assert packed_tests.unpack(pack(json.dumps(cases)), "w") == cases
    assert packed_tests.unpack(pack(json.dumps({"a": [1, 2]})), "w") == {"a": [1, 2]}
    assert packed_tests.unpack(pack(cases), "w") == cases  # a pickled list, through the restricted unpickler
    monkeypatch.setattr(packed_tests, "MAX_TEST_MB", 0)
    with pytest.raises(SuiteError, match="a test over 0 MiB"):
        packed_tests.unpack(pack(json.dumps(cases)), "w")
    monkeypatch.setattr(packed_tests, "MAX_TEST_MB", 64)
    for bad, reason in ((json.dumps(cases)[:-1], "cut short"), (json.dumps(cases) + "[]", "extra data"),
                        (json.dumps(cases).replace("}, {", "} {", 1), "comma")):
        with pytest.raises(SuiteError, match=reason):
            packed_tests.unpack(pack(bad), "w")
