"""The evalplus adapter (HumanEval+ and MBPP+): conversion, and verdicts that agree with
evalplus's rules on the tasks it judges specially."""

from __future__ import annotations

import pytest

from conftest import BENCH, need_image
from grpo_code.config import SandboxConfig
from grpo_code.errors import SuiteError
from grpo_code.sandbox import Sandbox
from grpo_code.verify.check import check_suite
from grpo_code.tasks.evalplus import evalplus, mbpp_inputs
from grpo_code.tasks.suite import suite_from_records

HE = {"task_id": "HumanEval/900", "prompt": "def pair(x):\n    \"\"\"Return (x, [x]).\"\"\"\n",
      "entry_point": "pair", "canonical_solution": "    return (x, [x])\n", "atol": 0,
      "base_input": [[1], [2]], "plus_input": [[3.5], ["s"]], "contract": "", "test": ""}
ZERO = {"task_id": "HumanEval/32", "entry_point": "find_zero", "atol": 1e-4, "contract": "", "test": "",
        "prompt": "import math\n\ndef find_zero(xs: list):\n    \"\"\"A root of the polynomial xs.\"\"\"\n",
        "canonical_solution": "    lo, hi = -1e3, 1e3\n    f = lambda x: sum(c * x ** i for i, c in enumerate(xs))\n"
                              "    for _ in range(200):\n        mid = (lo + hi) / 2\n"
                              "        if (f(lo) < 0) == (f(mid) < 0):\n            lo = mid\n"
                              "        else:\n            hi = mid\n    return lo\n",
        "base_input": [[[-6, 11, -6, 1]]], "plus_input": [[[-2, 0, 1, 0]]]}
SET = {"task_id": "Mbpp/2", "prompt": '"""\nShared elements.\nassert set(similar_elements((3, 4),(4, 5))) == {4}\n"""\n',
       "entry_point": "similar_elements", "atol": 0,
       "canonical_solution": "def similar_elements(a, b):\n    return tuple(set(a) & set(b))\n",
       "base_input": [[[3, 4, 5, 6], [5, 7, 4, 10]]], "plus_input": [[["kx", "y", "z"], ["z", "kx"]]]}
MATCH = {"task_id": "Mbpp/737", "prompt": '"""\nStarts with a vowel.\n"""\n', "entry_point": "check_str", "atol": 0,
         "canonical_solution": "import re\ndef check_str(s):\n    return re.search('^[aeiouAEIOU]', s)\n",
         "base_input": [["annie"], ["dawood"]], "plus_input": [["Else"]]}


def test_records_become_call_tests_with_inputs_only():
    [task] = evalplus([HE])
    assert task["mode"] == "complete" and task["reference"] == HE["prompt"] + HE["canonical_solution"]
    assert task["metadata"]["test_groups"] == {"base": 2, "plus": 2}
    assert all(t["kind"] == "call" and "expected" not in t and t["compare"] == "python" for t in task["tests"])
    assert [t["args"] for t in evalplus([HE], tests="plus")[0]["tests"]] == [[3.5], ["s"]]
    [mbpp] = evalplus([SET])
    assert mbpp["mode"] == "instruct" and mbpp["prompt"].startswith("Shared elements.")
    assert mbpp["tests"][0]["args"] == [{"$t": [3, 4, 5, 6]}, {"$t": [5, 7, 4, 10]}]  # evalplus: tuples
    assert mbpp["tests"][0]["checker"] == "set_equal" and "set_equal" in mbpp["checkers"]
    [zero] = evalplus([ZERO])
    assert zero["tests"][0]["checker"] == "root" and "<= 0.0001" in zero["checkers"]["root"]


def test_mbpp_inputs_get_the_types_evalplus_gives_them():
    assert mbpp_inputs(2, [[[1, 2], [3]]]) == [[(1, 2), (3,)]]
    assert mbpp_inputs(252, [["1+2j"]]) == [[1 + 2j]]
    assert mbpp_inputs(580, [[[1, [2, 3]], 4]]) == [[(1, (2, 3)), 4]]
    assert mbpp_inputs(722, [[{"a": [1, 2]}, 3]]) == [[{"a": (1, 2)}, 3]]
    assert mbpp_inputs(3, [[[1, 2]]]) == [[[1, 2]]]


def test_bad_records_name_the_record_and_field():
    with pytest.raises(SuiteError, match=r"evalplus\[0\] \(HumanEval/900\): plus_input: missing"):
        evalplus([{k: v for k, v in HE.items() if k != "plus_input"}])
    with pytest.raises(SuiteError, match="base_input: must be a list of argument lists"):
        evalplus([dict(HE, base_input=[1, 2])])
    with pytest.raises(SuiteError, match=r"\[0\] \(Mbpp/2\): base_input: does not have the argument types evalplus "
                                         r"gives Mbpp/2"):
        evalplus([dict(SET, base_input=[[1, 2]])])  # Mbpp/2 takes tuples: tuple(1) is a TypeError
    [task] = evalplus([dict(HE, plus_input={})])  # MBPP+ v0.2.0's Mbpp/793: no plus inputs
    assert task["metadata"]["test_groups"] == {"base": 2, "plus": 0}


@pytest.mark.docker
def test_special_rules_judge_as_evalplus_does(docker_ready, tmp_cache):
    need_image("python")
    suite = suite_from_records("ep", evalplus([HE, ZERO, SET, MATCH]), "inline")
    programs = {
        # (task, program, verdict expected under evalplus's rules)
        ("HumanEval/900", HE["prompt"] + "    return (x, [x])\n"): "pass",
        ("HumanEval/900", HE["prompt"] + "    return [x, [x]]\n"): "fail",  # a list is not the tuple
        ("HumanEval/32", ZERO["prompt"] + "    return 3.0 if xs[0] == -6 else 2 ** 0.5\n"): "pass",  # another root
        ("HumanEval/32", ZERO["prompt"] + "    return 0.5\n"): "fail",
        ("Mbpp/2", "def similar_elements(a, b):\n    return tuple(sorted(set(a) & set(b), key=str))[::-1]\n"): "pass",
        ("Mbpp/2", "def similar_elements(a, b):\n    return (4,)\n"): "fail",
        ("Mbpp/737", "import re\ndef check_str(s):\n    return re.match('[aeiouAEIOU]', s)\n"): "pass",
        ("Mbpp/737", "def check_str(s):\n    return s[0] in 'aeiouAEIOU'\n"): "pass",  # a bool answer
        ("Mbpp/737", "def check_str(s):\n    return 1\n"): "fail",
    }
    with Sandbox(SandboxConfig(backend="docker", workers=2)) as sandbox:
        report = check_suite(suite, sandbox)
        assert report.summary()["reference"]["passed"] == 4, report.summary()
        # evalplus accepts None where the reference finds no match: a stub passes those inputs
        assert report.summary()["empty"]["broken"] == ["Mbpp/737"]
        from grpo_code.verify import oracle

        resolved, broken = oracle.resolve(suite, sandbox)
        assert not broken
        results = sandbox.run([resolved.get(tid).job(p) for tid, p in programs])
    assert [r.status.value for r in results] == list(programs.values()), [
        (k[0], r.tests[0].message) for k, r in zip(programs, results)]


@pytest.mark.docker
@pytest.mark.parametrize("name, ids", [
    ("HumanEvalPlus.jsonl.gz", ["HumanEval/0", "HumanEval/32", "HumanEval/83", "HumanEval/139"]),
    ("MbppPlus.jsonl.gz", ["Mbpp/2", "Mbpp/124", "Mbpp/252", "Mbpp/581", "Mbpp/737"]),
])
def test_release_tasks_check_clean(docker_ready, tmp_cache, name: str, ids: list[str]):
    """A few release tasks with the rules above (the whole releases: docs/tasks.md)."""
    path = BENCH / "evalplus" / name
    if not path.is_file():
        pytest.skip(f"{path} absent (shared benchmarks)")
    need_image("python")
    from grpo_code.tasks.adapters import read_records

    records = [r for r in read_records(str(path)) if r["task_id"] in ids]
    suite = suite_from_records("ep", evalplus(records), str(path))
    with Sandbox(SandboxConfig(backend="docker", workers=2)) as sandbox:
        s = check_suite(suite, sandbox).summary()
    assert s["reference"]["passed"] == len(ids), s["reference"]["failures"]
    assert set(s["empty"]["broken"]) <= {"Mbpp/737"}, s["empty"]["broken"]
