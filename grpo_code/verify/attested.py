"""The attestation rule: a pass the program could have forged is not a pass.

A JavaScript or C++ ``script`` test runs its asserts in the program's own process; its
result says ``attested: false`` (docs/sandbox.md, What remains), because a program
written to forge the harness's completion report can (a static initializer that reads
the nonce, node's shared Buffer pool). The verifier applies this rule to every result it
hands out (training reward, eval sample, multi-turn check), once, here: such a test's
``pass`` becomes a ``fail`` whose message says why, unless the caller opts in
(``rewards.tests.trust_unattested``). The verdict store keeps the sandbox's raw result,
so changing the setting never needs a fresh run; ``tasks check`` reads raw results and
counts the unattested tests and tasks instead.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from grpo_code.sandbox.executor.runners import RUNNERS
from grpo_code.sandbox.types import Result, Status, Verdict

UNATTESTED_MESSAGE = (
    "passed, but its asserts ran inside the program's process (attested: false), where a program can "
    "forge the pass: not a pass unless rewards.tests.trust_unattested is true (docs/rewards.md)"
)


def unattested_passes(result: Result | None) -> int:
    """How many of the result's passes rest on tests the program could have forged."""
    if result is None:
        return 0
    return sum(1 for t in result.tests if t.verdict is Verdict.PASS and not t.attested)


def attested_only(result: Result | None) -> Result | None:
    """``result`` with each unattested pass counted as a ``fail`` (the same object when it
    has none). An infrastructure error has no tests and stays as it is."""
    if not unattested_passes(result):
        return result
    assert result is not None
    tests = tuple(
        dataclasses.replace(t, verdict=Verdict.FAIL, message=UNATTESTED_MESSAGE)
        if t.verdict is Verdict.PASS and not t.attested else t
        for t in result.tests
    )
    passed = sum(1 for t in tests if t.verdict is Verdict.PASS)
    return dataclasses.replace(result, passed=passed, tests=tests,
                               status=Status.PASS if passed == result.total else Status.FAIL)


def script_tasks(tasks: Any) -> list[str]:
    """Ids of the tasks with a test that can only be judged unattested: a ``script`` test
    that its language's runner runs in the program's process (C++ without the task's
    declarations in ``helpers``; Python and JavaScript script tests, and C++ ones with
    declarations, run in a judge of their own). Known before anything runs, so a training
    run can say at its start why such tasks will not score."""
    items = getattr(tasks, "tasks", tasks)
    out = []
    for t in items:
        codes = [test.code for test in t.tests if test.kind == "script"]
        if codes and not RUNNERS[t.language].judges(t.helpers, codes):
            out.append(t.id)
    return out
