"""``tasks audit``: how strong each task's tests are, before training rewards them.

Two batteries, both run through the same sandbox and :class:`~grpo_code.verify.verifier.Verifier`
as training (an unattested pass is a fail, as for the reward):

- **shortcuts** (:mod:`.shortcuts`): wrong programs RL finds first (return a constant,
  exit 0 at start, print the sample outputs, ...). A task that any shortcut passes is
  *hackable*; the report names the shortcuts.
- **mutants** (:mod:`.mutants`): the reference with one small change. The *mutation score*
  is the share of mutants the tests reject (a mutant that does not compile does not count);
  the mutants that survive are listed. Some survivors are equivalent to the reference (no
  test could reject them); ``stronger`` (a stronger suite of the same tasks, such as
  HumanEval+ for HumanEval) tells them apart: a survivor that the stronger suite rejects
  is a gap in these tests, one that survives both is likely equivalent.

Every run stops at its first failing test (pass or fail is all that is asked), runs on the
warm pool, and is cached on disk by its content (program, tests, limits, sandbox
fingerprint; ``$GRPO_CODE_CACHE/audit.sqlite``), so an audit that stops resumes where it
was and an unchanged suite re-audits from the cache. The last audit of a suite version is
kept (:func:`save_last`) for training to read (``tasks.exclude_weak``).

A shortcut or mutant that ends in ``infra_error`` is the sandbox's failure, not a verdict:
the audit counts it, names the task and fails loudly (it never reads as a weak or strong test).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from grpo_code.errors import SuiteError
from grpo_code.paths import cache_dir
from grpo_code.sandbox.types import Status, Verdict
from grpo_code.verify import oracle
from grpo_code.verify.mutants import mutants as make_mutants
from grpo_code.verify.runs import Source
from grpo_code.verify.shortcuts import shortcuts as make_shortcuts
from grpo_code.verify.store import RewardCache
from grpo_code.verify.verifier import Verifier

MIN_SCORE = 0.8
"""Default mutation score under which a task's tests count as weak."""
MUTANTS = 20
"""Default number of mutants per task."""


@dataclass
class Survivor:
    description: str
    verdict_in_stronger: str | None = None  # "rejected" | "survives" | None (no stronger suite)


@dataclass
class TaskAudit:
    task_id: str
    tests: int
    shortcuts: list[str] = field(default_factory=list)
    """Shortcuts that passed every test."""
    shortcuts_run: int = 0
    mutants: int = 0
    killed: int = 0
    survivors: list[Survivor] = field(default_factory=list)
    not_compiled: int = 0
    infra_errors: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def hackable(self) -> bool:
        return bool(self.shortcuts)

    @property
    def score(self) -> float | None:
        return self.killed / self.mutants if self.mutants else None

    def weak(self, min_score: float) -> bool:
        return self.hackable or (self.score is not None and self.score < min_score)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["hackable"], out["score"] = self.hackable, None if self.score is None else round(self.score, 4)
        return out


@dataclass
class AuditReport:
    suite: str
    suite_hash: str
    tasks: list[TaskAudit]
    seconds: float
    programs: int
    cached: int
    min_score: float
    stronger: str | None = None

    def summary(self) -> dict[str, Any]:
        scores = [t.score for t in self.tasks if t.score is not None]
        hackable = [t.task_id for t in self.tasks if t.hackable]
        weak = [t.task_id for t in self.tasks if t.weak(self.min_score)]
        counts: dict[str, int] = {}
        for t in self.tasks:
            for name in t.shortcuts:
                counts[name] = counts.get(name, 0) + 1
        return {"suite": self.suite, "suite_hash": self.suite_hash, "tasks": len(self.tasks),
                "hackable": hackable, "weak": weak, "min_score": self.min_score,
                "shortcuts_passed": dict(sorted(counts.items(), key=lambda kv: -kv[1])),
                "mutation_score": _distribution(scores), "mutants": sum(t.mutants for t in self.tasks),
                "killed": sum(t.killed for t in self.tasks), "seconds": round(self.seconds, 1),
                "programs": self.programs, "cached": self.cached,
                "programs_per_s": round(self.programs / self.seconds, 1) if self.seconds else None,
                "stronger": self.stronger,
                "infra_errors": sorted({t.task_id for t in self.tasks if t.infra_errors}),
                "per_task": [t.to_dict() for t in self.tasks]}

    def line(self) -> str:
        s = self.summary()
        dist = s["mutation_score"]
        median = "n/a" if dist["n"] == 0 else f"{dist['median']:.2f}"
        return (f"{self.suite}: {len(s['hackable'])} of {s['tasks']} tasks hackable, median mutation score "
                f"{median} ({s['killed']}/{s['mutants']} mutants killed), {len(s['weak'])} weak "
                f"(hackable or score < {self.min_score:g})")


def _distribution(scores: list[float]) -> dict[str, Any]:
    if not scores:
        return {"n": 0}
    ordered = sorted(scores)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 4)

    return {"n": len(ordered), "mean": round(sum(ordered) / len(ordered), 4), "min": ordered[0],
            "p25": at(0.25), "median": at(0.5), "p75": at(0.75), "perfect": sum(1 for x in ordered if x == 1.0)}


def audit_cache() -> RewardCache:
    return RewardCache(path=cache_dir() / "audit.sqlite")


def audit_suite(suite: Any, sandbox: Any, shortcuts: bool = True, mutants: int = MUTANTS,
                stronger: Any | None = None, min_score: float = MIN_SCORE, cache: RewardCache | None = None,
                progress: Callable[[int, int], None] | None = None) -> AuditReport:
    """Audit every task of ``suite`` (see the module docstring)."""
    started = time.perf_counter()
    resolved, broken = oracle.resolve(suite, sandbox)
    cache = cache if cache is not None else audit_cache()
    verifier = Verifier(resolved, sandbox, stop_on_failure=True, cache=cache)
    strong_tasks: dict[str, Any] = {}
    strong_verifier = None
    if stronger is not None:
        strong, _ = oracle.resolve(stronger, sandbox)
        strong_tasks = {t.id: t for t in strong.tasks}
        strong_verifier = Verifier(strong, sandbox, stop_on_failure=True, cache=cache)
    audits: list[TaskAudit] = []
    pending: list[tuple[TaskAudit, str, Any, Any]] = []  # (audit, kind, label, handle)
    for task in resolved.tasks:
        audit = TaskAudit(task.id, len(task.tests))
        audits.append(audit)
        if task.id in broken:
            audit.note = f"not audited: {broken[task.id]}"
            continue
        if shortcuts:
            for cut in make_shortcuts(task):
                pending.append((audit, "shortcut", cut.name, verifier.submit_sample(task, {"solution": cut.program})))
                audit.shortcuts_run += 1
        if mutants and task.reference:
            # A complete task's prompt gives its helpers: only the entry point is the reference's own.
            only = task.entry_point if task.mode == "complete" else None
            for mutant in make_mutants(task.reference, task.language, mutants, only):
                pending.append((audit, "mutant", mutant, verifier.submit_sample(task, {"solution": mutant.program})))
        elif mutants and not task.reference:
            audit.note = "no reference: no mutants"
    total, done = len(pending), 0
    later: list[tuple[TaskAudit, Any, Any]] = []
    for audit, kind, label, handle in pending:
        result = verifier.attested(handle.task, Verifier.result(handle))
        done += 1
        if progress:
            progress(done, total + len(later))
        if result is None:
            continue
        if result.status is Status.INFRA_ERROR:
            audit.infra_errors.append(f"{kind} {label if kind == 'shortcut' else label.description}: {result.error}")
            continue
        passed = result.status is Status.PASS
        if kind == "shortcut":
            if passed:
                audit.shortcuts.append(label)
            continue
        if result.tests and result.tests[0].verdict is Verdict.COMPILE_ERROR:
            audit.not_compiled += 1
            continue
        audit.mutants += 1
        if not passed:
            audit.killed += 1
            continue
        survivor = Survivor(label.description)
        audit.survivors.append(survivor)
        strong_task = strong_tasks.get(audit.task_id)
        if strong_verifier is not None and strong_task is not None:
            later.append((audit, survivor, strong_verifier.submit_sample(strong_task, {"solution": label.program})))
    for _, survivor, handle in later:
        result = Verifier.result(handle)
        done += 1
        if progress:
            progress(done, total + len(later))
        if result is None or result.status is Status.INFRA_ERROR:
            survivor.verdict_in_stronger = None
            continue
        survivor.verdict_in_stronger = "survives" if result.status is Status.PASS else "rejected"
    report = AuditReport(suite.name, suite.content_hash(), audits, time.perf_counter() - started,
                         len(pending) + len(later), verifier.counts.get(Source.CACHE, 0), min_score,
                         getattr(stronger, "name", None))
    return report


def last_audit_path(suite_hash: str) -> Path:
    return cache_dir() / "audit" / f"{suite_hash}.json"


def save_last(report: AuditReport) -> Path:
    """Keep the report of this suite version, for training to read (``tasks.exclude_weak``)."""
    path = last_audit_path(report.suite_hash)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"saved_at": time.strftime("%Y-%m-%d %H:%M:%S"), **report.summary()}
    tmp = path.with_suffix(".partial")
    tmp.write_text(json.dumps(payload))
    tmp.replace(path)
    return path


def load_last(suite_hash: str) -> dict[str, Any] | None:
    """The last audit of a suite version, or None."""
    path = last_audit_path(suite_hash)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def weak_tasks(audit: dict[str, Any], min_score: float) -> set[str]:
    """The tasks of a saved audit that are hackable or under ``min_score``."""
    out = set()
    for t in audit.get("per_task", []):
        score = t.get("score")
        if t.get("hackable") or (score is not None and score < min_score):
            out.add(t["task_id"])
    return out


def require_clean(report: AuditReport) -> None:
    """An audit whose runs hit the sandbox's own failures is not a measurement: loud."""
    failed = [t for t in report.tasks if t.infra_errors]
    if failed:
        first = failed[0]
        raise SuiteError(f"the sandbox failed {sum(len(t.infra_errors) for t in failed)} audit runs of "
                         f"{len(failed)} tasks (first: {first.task_id}: {first.infra_errors[0][:200]})",
                         "check `grpo-code sandbox doctor`, then rerun (finished runs come from the cache)")


def audited_weak(suite: Any, train: Any, exclude: bool, min_score: float, log: Callable[[str], None]) -> Any:
    """``train`` (a split of ``suite``) as training takes it: what the last audit of the suite
    (or of this split) found weak is said in one line, and left out when ``exclude``."""
    audit = load_last(suite.content_hash()) or load_last(train.content_hash())
    if audit is None:
        if exclude:
            raise SuiteError(f"tasks.exclude_weak is set but suite {suite.name!r} (this version) has not been audited",
                             f"run `grpo-code tasks audit {suite.path or suite.name}` first, or unset it")
        return train
    weak = weak_tasks(audit, min_score) & {t.id for t in train.tasks}
    hackable = {t["task_id"] for t in audit.get("per_task", []) if t.get("hackable")} & weak
    what = (f"the last audit ({audit.get('saved_at', '?')}) found {len(weak)} of {len(train)} train tasks weak "
            f"({len(hackable)} hackable, {len(weak) - len(hackable)} with a mutation score under {min_score:g})")
    if not exclude or not weak:
        log(what + ("; tasks.exclude_weak=true leaves them out" if weak else ""))
        return train
    kept = tuple(t for t in train.tasks if t.id not in weak)
    if not kept:
        raise SuiteError(f"{what}: none is left to train on", "lower tasks.min_mutation_score or unset exclude_weak")
    log(what + f"; left out (tasks.exclude_weak), training on {len(kept)}")
    return replace(train, tasks=kept)
