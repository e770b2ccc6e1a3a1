"""``tasks check``: run a suite's reference (and empty) solutions through the sandbox.

A healthy suite has every reference pass every test and every empty solution fail every
test (a test that an empty program passes checks nothing). The empty solution is a stub
that defines the entry point and returns nothing (:func:`empty_program`). Repeating the
runs finds flaky tasks (verdicts that change between runs); durations find slow tasks.
Tasks whose expected values come from their reference (oracles) get them first; a
reference run against values it computed itself proves it is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_code.errors import SuiteError
from grpo_code.sandbox.types import Result, Status
from grpo_code.tasks.samples import read_samples_file
from grpo_code.tasks.suite import Suite
from grpo_code.verify import oracle
from grpo_code.verify.failure import failure_of
from grpo_code.verify.runs import Source
from grpo_code.verify.verifier import Verifier

SLOW_FRACTION = 0.5
"""A task is slow when a test takes more than this share of its time limit."""


@dataclass
class TaskCheck:
    task_id: str
    kind: str  # reference | empty | file
    runs: list[Result] = field(default_factory=list)
    note: str = ""

    def first_failure(self) -> str | None:
        """Why the solution did not pass: the first failing test of the first bad run."""
        if self.note and self.note != "no solution":
            return self.note
        for run in self.runs:
            failure = failure_of(run)
            if failure is not None:
                return failure.line()
        return None

    @property
    def passed_all(self) -> bool:
        return bool(self.runs) and all(r.status is Status.PASS for r in self.runs)

    @property
    def passed_any_test(self) -> bool:
        return any(r.passed > 0 for r in self.runs)

    @property
    def infra(self) -> bool:
        return any(r.status is Status.INFRA_ERROR for r in self.runs)

    @property
    def flaky(self) -> bool:
        shapes = {tuple(t.verdict.value for t in r.tests) for r in self.runs if r.status is not Status.INFRA_ERROR}
        return len(shapes) > 1

    def max_test_ms(self) -> float:
        return max((t.duration_ms for r in self.runs for t in r.tests), default=0.0)


@dataclass
class CheckReport:
    suite: str
    suite_hash: str
    tasks: int
    repeat: int
    checks: dict[str, list[TaskCheck]]
    slow: list[tuple[str, float]]

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"suite": self.suite, "suite_hash": self.suite_hash, "tasks": self.tasks,
                               "repeat": self.repeat, "slow": [{"id": i, "max_test_ms": ms} for i, ms in self.slow]}
        for kind, items in self.checks.items():
            flaky = sorted(c.task_id for c in items if c.flaky)
            infra = sorted(c.task_id for c in items if c.infra)
            if kind == "empty":
                broken = sorted(c.task_id for c in items if c.passed_any_test)
                skipped = sorted(c.task_id for c in items if not c.runs)
                # failed: the stub fails the task; broken: it passes some test (which checks nothing)
                failed = sum(1 for c in items if c.runs and all(r.status is Status.FAIL for r in c.runs))
                out["empty"] = {"checked": len(items) - len(skipped), "failed": failed,
                                "broken": broken, "passed_tests": {c.task_id: _passed_tests(c) for c in items
                                                                   if c.task_id in broken},
                                "skipped": skipped, "flaky": flaky, "infra_errors": infra}
            else:
                bad = sorted(c.task_id for c in items if not c.passed_all and c.note != "no solution")
                missing = sorted(c.task_id for c in items if c.note == "no solution")
                checked = len(items) - len(missing)  # a task without a solution checks nothing
                # Tests whose asserts ran next to the program (JavaScript/C++ script tests):
                # a program written to forge them could (docs/sandbox.md, threat model).
                unattested = sum(not t.attested for c in items for r in c.runs[:1] for t in r.tests)
                # Tasks with such a test: a pass of theirs is a fail for the reward and eval
                # unless rewards.tests.trust_unattested (grpo_code/verify/attested.py).
                unattested_tasks = sorted(c.task_id for c in items
                                          if any(not t.attested for r in c.runs[:1] for t in r.tests))
                out[kind] = {"checked": checked, "passed": checked - len(bad), "failed": bad,
                             "failures": {c.task_id: c.first_failure() for c in items if c.task_id in bad},
                             "no_reference" if kind == "reference" else "missing": missing,
                             "flaky": flaky, "infra_errors": infra, "unattested_tests": unattested,
                             "unattested_tasks": unattested_tasks}
        return out

    @property
    def ok(self) -> bool:
        """References (or a file's solutions) all pass; a file's solutions were checked at
        all (a suite without references checks none, and says so); empty solutions all
        fail; nothing flaky."""
        s = self.summary()
        good = True
        for kind in ("reference", "file"):
            if kind in s:
                good &= not s[kind]["failed"] and not s[kind]["flaky"]
        if "file" in s:
            good &= s["file"]["checked"] > 0
        if "empty" in s:
            good &= not s["empty"]["broken"] and not s["empty"]["flaky"] and not s["empty"]["infra_errors"]
        return bool(good)


def _passed_tests(check: TaskCheck) -> list[int]:
    return sorted({i for r in check.runs for i, t in enumerate(r.tests) if t.passed})


def _indent_of_last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line[: len(line) - len(line.lstrip())] or "    "
    return "    "


def empty_program(task) -> str:
    """The empty solution: a stub that defines the entry point and returns nothing (a
    ``complete`` task keeps its prefix, with the helpers it defines). Where there is no
    entry point (stdin/stdout tasks) it is the empty program."""
    entry = task.entry_point
    if task.language == "python":
        stub = f"\n\ndef {entry}(*args, **kwargs):\n    return None\n" if entry else ""
        if task.mode == "complete":
            prefix = task.prompt.rstrip() + f"\n{_indent_of_last_line(task.prompt)}pass\n"
            try:
                compile(prefix, "prompt", "exec")
            except (SyntaxError, ValueError):
                prefix = ""
            return prefix + stub
        return stub.lstrip()
    if task.mode == "complete":
        return task.prompt.rstrip() + "\n}\n"  # close the prefix's function: returns nothing
    if entry and task.language == "javascript":
        return f"function {entry}() {{ return undefined; }}\n"
    return ""


def _solutions_file(path: Path, suite: Suite) -> dict[str, dict[str, Any]]:
    """The first sample of each task in a samples file."""
    return {s["task_id"]: s for s in read_samples_file(path, suite) if s["index"] == 0}


def check_suite(
    suite: Suite,
    sandbox: Any,
    solutions: str = "both",
    repeat: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> CheckReport:
    """Run the chosen solutions (``both``, ``reference``, ``empty`` or a file path) ``repeat`` times."""
    if repeat < 1:
        raise SuiteError(f"--repeat {repeat} must be >= 1", "use --repeat 3 to look for flaky tasks")
    kinds: dict[str, dict[str, dict[str, Any]]] = {}
    if solutions in ("both", "reference"):
        kinds["reference"] = {t.id: {"solution": t.reference} for t in suite.tasks if t.reference is not None}
    if solutions in ("both", "empty"):
        kinds["empty"] = {t.id: {"solution": empty_program(t)} for t in suite.tasks}
    if not kinds:
        kinds["file"] = _solutions_file(Path(solutions), suite)
    # Expected values that come from references first (cached: computed once per suite version).
    resolved, broken = oracle.resolve(suite, sandbox, progress=progress)
    # No verdict store: each repeat runs again (that is how flaky tasks show). A reference or
    # a solution is asked pass or fail, so its run stops at its first failing test; the empty
    # stub runs every test, to find those it passes (tests that cannot fail).
    verifiers = {kind: Verifier(resolved, sandbox, stop_on_failure=kind != "empty") for kind in kinds}
    checks: dict[str, list[TaskCheck]] = {k: [] for k in kinds}
    pending = []
    for kind, samples in kinds.items():
        for task in suite.tasks:
            check = TaskCheck(task.id, kind)
            checks[kind].append(check)
            sample = samples.get(task.id)
            if sample is None:
                check.note = "no solution"
                continue
            if task.id in broken:  # no expected values: its reference fails its own inputs
                check.note = broken[task.id]
                continue
            for _ in range(repeat):
                verifier = verifiers[kind]
                handle = verifier.submit_sample(verifier.task(task.id), sample)
                if handle.future is None:  # no code, or unfinished: nothing to run
                    check.note = {Source.NO_CODE: "no code", Source.UNFINISHED: "unfinished (cut at the length "
                                  "limit inside its program)"}[handle.source]
                    break
                pending.append((check, handle))
    total = len(pending)
    for done, (check, handle) in enumerate(pending, 1):
        result = Verifier.result(handle)
        if check.kind == "file":
            # A solutions file is judged as eval judges it: an unattested pass is a fail. The
            # references and the stub check the suite itself, so they keep the sandbox's
            # verdicts and the unattested tests are counted instead.
            result = verifiers["file"].attested(handle.task, result)
        check.runs.append(result)
        if progress:
            progress(done, total)
    slow = []
    for check in checks.get("reference", []):
        task = suite.get(check.task_id)
        limit_ms = (task.limits.timeout_s or sandbox.config.timeout_s) * 1000
        if check.max_test_ms() > SLOW_FRACTION * limit_ms:
            slow.append((check.task_id, round(check.max_test_ms(), 1)))
    return CheckReport(suite.name, suite.content_hash(), len(suite), repeat, checks, slow)
