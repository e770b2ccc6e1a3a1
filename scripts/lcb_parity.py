"""LiveCodeBench grading parity: the same samples judged by LiveCodeBench's own grader and
by `grpo-code eval --samples` on the suite the `livecodebench` adapter makes, pass/fail
compared sample by sample.

    .venv/bin/python scripts/lcb_parity.py --lcb ~/src/LiveCodeBench           # docker backend
    .venv/bin/python scripts/lcb_parity.py --lcb ~/src/LiveCodeBench --sandbox local --json

``--lcb``: a checkout of https://github.com/LiveCodeBench/LiveCodeBench (its
``lcb_runner/evaluation/testing_util.py`` is imported from there, never copied; it needs
numpy, which this venv has). The problems are written here in LiveCodeBench's record shape
(stdin and LeetCode functional ones); the samples are each problem's right programs and
variants that probe the comparison: wrong answers, trailing and leading whitespace, extra
blank lines, ``1.0`` for ``1``, floats printed to other precisions, a tuple for a list,
``True`` for ``1``, deep recursion (LiveCodeBench's ``sys.setrecursionlimit(50000)``), an
integer past Python's 4,300-digit limit, ``if __name__ == "__main__"``, ``List`` without
an import. Each sample runs in LiveCodeBench's ``run_test`` in a fresh process (as its
``check_correctness`` does). Differences whose cause is known are printed with it; exit
status 1 when another differs. Never imported by the package.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grpo_code.tasks.rl_sets import livecodebench  # noqa: E402


def stdin_case(i: str, o: str) -> dict:
    return {"input": i, "output": o, "testtype": "stdin"}


def call_case(args: list, out: object) -> dict:
    return {"input": "\n".join(json.dumps(a) for a in args), "output": json.dumps(out), "testtype": "functional"}


def problem(qid: str, cases: list[dict], func: str | None = None, starter: str = "") -> dict:
    return {"question_title": qid, "question_content": f"Problem {qid}.", "platform": "leetcode" if func else "atcoder",
            "question_id": qid, "contest_id": "c1", "contest_date": "2024-06-01T00:00:00", "difficulty": "easy",
            "starter_code": starter, "public_test_cases": json.dumps(cases[:1]),
            "private_test_cases": json.dumps(cases[1:]), "metadata": json.dumps({"func_name": func} if func else {})}


def solution(func: str, params: str, body: str) -> str:
    return f"class Solution:\n    def {func}(self, {params}):\n" + "".join(f"        {line}\n" for line in body.split("\n"))


sys.set_int_max_str_digits(0)
BIG = str(2 ** 20000)
"""An answer of 6,021 digits: past the 4,300 Python prints by default."""

PROBLEMS = [
    problem("sum", [stdin_case("3\n1 2 3\n", "6\n"), stdin_case("2\n10 20\n", "30\n")]),
    problem("half", [stdin_case("1\n", "0.5\n"), stdin_case("3\n", "1.5\n")]),
    problem("pairs", [stdin_case("2\n", "1 2\n2 1\n"), stdin_case("1\n", "1 1\n1 1\n")]),
    problem("deep", [stdin_case("20000\n", "20000\n"), stdin_case("5\n", "5\n")]),
    problem("pow2", [stdin_case("20000\n", BIG + "\n"), stdin_case("10\n", "1024\n")]),
    problem("twosum", [call_case([[2, 7, 11, 15], 9], [0, 1]), call_case([[3, 2, 4], 6], [1, 2])], "twoSum",
            "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        "),
    problem("isodd", [call_case([3], True), call_case([4], False)], "isOdd",
            "class Solution:\n    def isOdd(self, n: int) -> bool:\n        "),
    problem("mean", [call_case([[1, 2]], 1.5), call_case([[1, 1, 1]], 1.0)], "mean",
            "class Solution:\n    def mean(self, nums: List[int]) -> float:\n        "),
]

TWOSUM = "seen = {}\nfor i, x in enumerate(nums):\n    if target - x in seen:\n        return [seen[target - x], i]\n    seen[x] = i"
SAMPLES: dict[str, list[str]] = {
    "sum": ["input()\nprint(sum(map(int, input().split())))\n",
            "input()\nprint(sum(map(int, input().split())), ' ')\n",          # trailing space
            "input()\nprint('  ' + str(sum(map(int, input().split()))))\n",  # leading spaces
            "input()\nprint(sum(map(int, input().split())))\nprint()\n",     # a blank line after
            "input()\nprint(float(sum(map(int, input().split()))))\n",       # 6.0 for 6
            "input()\nprint(sum(map(int, input().split())) + 1)\n",          # wrong
            "def main():\n    input()\n    print(sum(map(int, input().split())))\n\nif __name__ == '__main__':\n"
            "    main()\n"],
    "half": ["print(int(input()) / 2)\n", "print(f'{int(input()) / 2:.3f}')\n", "print(int(input()) // 2)\n",
             "print(round(int(input()) / 2 + 1e-12, 15))\n"],
    "pairs": ["n = int(input())\nprint(1, n)\nprint(n, 1)\n", "n = int(input())\nprint(1, n, end=' \\n')\nprint(n, 1)\n",
              "n = int(input())\nprint(1, n, n, 1)\n", "n = int(input())\nprint(f'{1}  {n}')\nprint(n, 1)\n"],
    "deep": ["def f(k):\n    return 0 if k == 0 else 1 + f(k - 1)\nprint(f(int(input())))\n",
             "import sys\nsys.setrecursionlimit(1000)\ndef f(k):\n    return 0 if k == 0 else 1 + f(k - 1)\n"
             "print(f(int(input())))\n"],
    "pow2": ["print(2 ** int(input()))\n", "import sys\nsys.set_int_max_str_digits(0)\nprint(2 ** int(input()))\n"],
    "twosum": [solution("twoSum", "nums: List[int], target: int", TWOSUM),
               solution("twoSum", "nums, target", TWOSUM.replace("return [seen[target - x], i]",
                                                                 "return (seen[target - x], i)")),
               solution("twoSum", "nums, target", "return [0, 1]")],
    "isodd": [solution("isOdd", "n", "return n % 2 == 1"), solution("isOdd", "n", "return n % 2"),
              solution("isOdd", "n", "return n > 3")],
    "mean": [solution("mean", "nums", "return sum(nums) / len(nums)"),
             solution("mean", "nums", "return sum(nums) / len(nums) + 1e-12"),
             solution("mean", "nums", "return sum(nums) // len(nums)")],
}

KNOWN = {
    ("isodd", 1): "a functional answer is compared as plain data here (True is not 1); LiveCodeBench uses Python's ==",
    ("mean", 1): "a float expected value allows 1e-9 relative here; LiveCodeBench compares floats exactly",
}
"""Differences whose cause is known (docs/tasks.md, LiveCodeBench's grader)."""

RUN_LCB = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("lcb_testing_util", sys.argv[1])
util = importlib.util.module_from_spec(spec)
spec.loader.exec_module(util)
sample, code = json.loads(sys.stdin.read())
try:
    res, meta = util.run_test(sample, test=code, debug=False, timeout=6)
    ok = bool(res) and all(r is True for r in res)
except Exception as exc:
    ok, meta = False, repr(exc)
print(json.dumps({"pass": ok, "meta": str(meta)[:200]}))
"""


def lcb_verdict(util: Path, record: dict, code: str) -> dict:
    cases = json.loads(record["public_test_cases"]) + json.loads(record["private_test_cases"])
    sample = {"input_output": json.dumps({"inputs": [c["input"] for c in cases], "outputs": [c["output"] for c in cases],
                                          "fn_name": json.loads(record["metadata"]).get("func_name")})}
    done = subprocess.run([sys.executable, "-c", RUN_LCB, str(util)], input=json.dumps([sample, code]),
                          capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {"pass": False, "meta": f"the grader died: {done.stderr[-200:]}"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lcb", type=Path, required=True, help="a checkout of LiveCodeBench")
    parser.add_argument("--sandbox", default="docker", help="grpo-code's sandbox backend (default docker)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    util = args.lcb.expanduser() / "lcb_runner" / "evaluation" / "testing_util.py"
    if not util.is_file():
        sys.exit(f"error: {util} not found (give --lcb a checkout of github.com/LiveCodeBench/LiveCodeBench)")
    tasks = livecodebench(PROBLEMS)
    with tempfile.TemporaryDirectory(prefix="lcb-parity-") as tmp:
        scratch = Path(tmp)
        suite = scratch / "suite"
        suite.mkdir()
        (suite / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
        samples = [(qid, i, code) for qid, codes in SAMPLES.items() for i, code in enumerate(codes)]
        path = scratch / "samples.jsonl"
        path.write_text("".join(json.dumps({"task_id": f"lcb/{q}", "solution": c}) + "\n" for q, _, c in samples))
        out = scratch / "eval"
        grpo = [str(ROOT / ".venv" / "bin" / "grpo-code")] if (ROOT / ".venv" / "bin" / "grpo-code").exists() else [
            shutil.which("grpo-code") or "grpo-code"]
        done = subprocess.run(grpo + ["eval", "--samples", str(path), "--tasks", str(suite), "--split", "all",
                                      "--out", str(out), "--sandbox", args.sandbox, "--k", "1"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"grpo-code eval failed ({done.returncode}):\n{done.stderr[-3000:]}")
        ours = {}
        for line in (out / "results.jsonl").read_text().splitlines():
            r = json.loads(line)
            ours[(r["task_id"].removeprefix("lcb/"), int(r["index"]))] = r
    records = {r["question_id"]: r for r in PROBLEMS}
    rows, unexplained = [], 0
    for qid, i, code in samples:
        theirs = lcb_verdict(util, records[qid], code)
        mine = ours[(qid, i)]["status"] == "pass"
        row = {"problem": qid, "sample": i, "grpo_code": mine, "livecodebench": theirs["pass"]}
        if mine != theirs["pass"]:
            row["known"] = KNOWN.get((qid, i))
            row["why"] = {"grpo_code": str(ours[(qid, i)].get("failure") or "")[:200], "livecodebench": theirs["meta"]}
            unexplained += row["known"] is None
        rows.append(row)
    same = sum(r["grpo_code"] == r["livecodebench"] for r in rows)
    if args.json:
        print(json.dumps({"samples": len(rows), "same": same, "unexplained": unexplained, "rows": rows}, indent=2))
    else:
        print(f"{len(rows)} samples on {len(PROBLEMS)} problems: same pass/fail on {same}, "
              f"{len(rows) - same} differ ({unexplained} unexplained)")
        for r in rows:
            if r["grpo_code"] != r["livecodebench"]:
                print(f"  {r['problem']} #{r['sample']}: grpo-code {'pass' if r['grpo_code'] else 'fail'}, "
                      f"LiveCodeBench {'pass' if r['livecodebench'] else 'fail'}"
                      + (f"; known: {r['known']}" if r["known"] else f"; {r['why']}"))
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
