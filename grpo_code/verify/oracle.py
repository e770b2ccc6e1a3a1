"""Reference oracles: expected values computed by running a task's reference.

A task may give its tests' inputs only (a ``call`` test without ``expected``, an ``io``
test without ``stdout``) and a ``reference`` program; the expected values are what the
reference answers, as evalplus computes HumanEval+ and MBPP+ outputs. :func:`resolve` runs
each such reference once in the sandbox as a *record* job (docs/sandbox.md, Jobs) and
fills the values in; they are cached on disk by content (the task's record and the
harness fingerprint), so a suite version is computed once per machine. The cache files are
``marshal`` data (values, the digests of the large ones, the reference's slowest test),
read back several times faster than gzipped JSON: HumanEval+'s 300 MB of expected values
load in about a second. A reference that
fails one of its own inputs leaves its task unresolved, with the reason: ``tasks check``
reports it, training and eval leave the task out and say so.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import marshal
import os
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from grpo_code.errors import GrpoCodeError, SandboxError
from grpo_code.paths import cache_dir
from grpo_code.sandbox.types import Result, Status
from grpo_code.tasks.schema import Resolved, Task
from grpo_code.verify.failure import failure_of
from grpo_code.verify.verifier import Verifier

SCHEMA = 2
FORMAT = f"marshal{marshal.version}-py{sys.version_info[0]}.{sys.version_info[1]}"
"""A cache file is read by the Python that wrote it (marshal's format is Python's own)."""


CACHE_MB_ENV = "GRPO_CODE_ORACLE_CACHE_MB"
DEFAULT_CACHE_MB = 2048
"""The oracle cache's size cap: past it, the least recently used files go (each harness
version computes its own values; HumanEval+'s take about 240 MB)."""
PARTIAL_GRACE_S = 3600.0
"""A ``.partial`` file younger than this may be another process's write in progress."""


def oracle_dir() -> Path:
    return cache_dir() / "oracle"


def cache_limit() -> int:
    """The cache cap in bytes (``$GRPO_CODE_ORACLE_CACHE_MB``, default 2048)."""
    raw = os.environ.get(CACHE_MB_ENV)
    if raw is None:
        return DEFAULT_CACHE_MB << 20
    try:
        mb = int(raw)
    except ValueError:
        mb = -1
    if mb < 0:
        raise GrpoCodeError(f"{CACHE_MB_ENV}={raw!r} is not a size in megabytes",
                            "set a whole number >= 0 (0 keeps only the files of the suite being resolved)")
    return mb << 20


def prune(keep: set[Path], limit: int) -> int:
    """Remove the least recently used cache files (by mtime: a load refreshes it) until the
    cache is at most ``limit`` bytes; never one in ``keep`` (the suite being resolved) nor
    another process's write in progress. Returns the bytes freed."""
    try:
        paths = list(oracle_dir().iterdir())
    except FileNotFoundError:
        return 0
    now, total, candidates = time.time(), 0, []
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue  # not ours
        total += st.st_size
        writing = path.name.endswith(".partial") and now - st.st_mtime < PARTIAL_GRACE_S
        if path not in keep and not writing:
            candidates.append((st.st_mtime, st.st_size, path))
    freed = 0
    for _, size, path in sorted(candidates):
        if total - freed <= limit:
            break
        try:
            path.unlink()
        except FileNotFoundError:
            freed += size  # another process pruned it
        except OSError:
            continue  # not ours to remove (a shared cache): the next one then
        else:
            freed += size
    return freed


def _key(task: Task, fingerprint: str) -> str:
    # The task by its content hash (the sha256 of its sorted JSON), not written out again.
    payload = json.dumps({"schema": SCHEMA, "task": task.content_hash(), "harness": fingerprint}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def _load(path: Path) -> tuple[dict[int, Any], dict[int, str], float] | None:
    """The stored values, the digests of the large ones, and the reference's slowest test (s)."""
    try:
        data = marshal.loads(path.read_bytes())
        if data["schema"] != SCHEMA or data["format"] != FORMAT:
            return None
        return dict(data["values"]), dict(data["large"]), float(data["reference_cpu_s"])
    except (OSError, ValueError, KeyError, TypeError, EOFError):
        return None  # absent or torn: computed again


def _store(path: Path, values: dict[int, Any], large: dict[int, str], reference_cpu_s: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.partial")
    tmp.write_bytes(marshal.dumps({"schema": SCHEMA, "format": FORMAT, "values": values, "large": large,
                                   "reference_cpu_s": reference_cpu_s}))
    tmp.replace(path)


def _touch(path: Path) -> None:
    """Mark a cache file used (its mtime orders :func:`prune`)."""
    try:
        os.utime(path)
    except OSError:
        pass  # a read-only cache still serves


def _with_answer(test: Any, value: Any) -> Any:
    """A copy of a frozen test with ``value`` as its expected value or output (without
    ``copy.copy``'s protocol or the dataclass's checks: a suite's hundred thousand tests are
    copied in a fraction of the time; the value is the sandbox's answer, already valid)."""
    new = object.__new__(type(test))
    fields = new.__dict__
    fields.update(test.__dict__)
    fields["stdout" if test.kind == "io" else "expected"] = value
    return new


def _pending(task: Task) -> list[int]:
    return [i for i, t in enumerate(task.tests) if not getattr(t, "has_expected", True)]


def fill(task: Task, values: dict[int, Any], large: dict[int, str] | None = None,
         reference_cpu_s: float | None = None) -> Task:
    """``task`` with the recorded answers as its tests' expected values. Its content hash
    stays the task's as written (the answers follow from its reference), so a suite's hash
    is the same before and after and costs nothing to compute here. ``large``: the digests
    of its large expected values (:func:`~grpo_code.sandbox.encoded.large_expected`), which
    its encoded tests then use instead of writing those values out again.
    ``reference_cpu_s``: the reference's slowest test, for ``limits.reference_factor``."""
    tests = list(task.tests)
    for i, value in values.items():
        tests[i] = _with_answer(tests[i], value)
    limits = task.limits.from_reference(reference_cpu_s) if reference_cpu_s is not None else task.limits
    filled = dataclasses.replace(task, tests=tuple(tests), limits=limits)
    object.__setattr__(filled, "resolved", Resolved(task.content_hash(), large))  # frozen: set once, here
    return filled


def _answers(task: Task, indices: list[int], result: Result) -> tuple[dict[int, Any] | None, str | None]:
    failure = failure_of(result)
    if failure is not None:
        # The job ran the pending tests only: name the test by its index in the task.
        named = replace(failure, test=indices[failure.test] if failure.test is not None else None)
        return None, f"reference oracle: the reference gives {named.line()}"
    return {i: test.value if task.tests[i].kind == "call" else test.stdout
            for i, test in zip(indices, result.tests)}, None


def resolve(suite: Any, sandbox: Any, progress: Callable[[int, int], None] | None = None,
            use_cache: bool = True) -> tuple[Any, dict[str, str]]:
    """The suite with every oracle task's expected values filled in, and the tasks that
    could not be (id -> why). Tasks without oracle tests are returned as they are."""
    todo = [t for t in suite.tasks if t.needs_oracle]
    if not todo:
        return suite, {}
    resolved: dict[str, Task] = {}
    broken: dict[str, str] = {}
    jobs = []
    limit = cache_limit()  # a bad setting is said before any work
    verifier = Verifier(todo, sandbox)
    keep = set()
    for task in todo:
        path = oracle_dir() / f"{_key(task, sandbox.fingerprint(task.language))}.{FORMAT}"
        keep.add(path)
        cached = _load(path) if use_cache else None
        indices = _pending(task)
        if cached is not None and set(cached[0]) == set(indices):
            resolved[task.id] = fill(task, *cached)
            _touch(path)
            continue
        only = dataclasses.replace(task, tests=tuple(task.tests[i] for i in indices))
        jobs.append((task, indices, path, verifier.record(only, task.reference)))
    for done, (task, indices, path, handle) in enumerate(jobs, 1):
        result = verifier.result(handle)
        if result is not None and result.status is Status.INFRA_ERROR:
            # The sandbox's failure, not the reference's: never a reason to drop the task.
            raise SandboxError(f"reference oracle of {task.id}: the sandbox failed ({result.error})",
                               "rerun (computed values are cached); `grpo-code sandbox doctor` if it persists")
        values, problem = _answers(task, indices, result)
        if values is None:
            broken[task.id] = problem or "reference oracle failed"
        else:
            slowest = max((t.cpu_ms for t in result.tests), default=0.0) / 1000
            filled = fill(task, values, reference_cpu_s=slowest)
            _store(path, values, filled.encoded_tests.large, slowest)  # encoded here once, as every job sends them
            resolved[task.id] = filled
        if progress:
            progress(done, len(jobs))
    if jobs:  # the cache grew
        prune(keep, limit)
    tasks = tuple(resolved.get(t.id, t) for t in suite.tasks if t.id not in broken)
    if not tasks:
        return dataclasses.replace(suite, tasks=()), broken
    return dataclasses.replace(suite, tasks=tasks), broken


def prepare(suite: Any, sandbox: Any, log: Callable[[str], None] = print) -> Any:
    """:func:`resolve` for training and eval: tasks whose reference fails its own inputs
    are left out, and said so; a suite left with no task is an error."""
    from grpo_code.errors import SuiteError

    if not any(t.needs_oracle for t in suite.tasks):
        return suite
    log(f"computing expected values from the references of {sum(t.needs_oracle for t in suite.tasks)} tasks "
        "(cached after the first run)")
    resolved, broken = resolve(suite, sandbox)
    if broken:
        shown = ", ".join(list(broken)[:5]) + (f" (+{len(broken) - 5} more)" if len(broken) > 5 else "")
        log(f"warning: {len(broken)} tasks left out, their reference fails its own inputs: {shown} "
            "(`grpo-code tasks check` says why)")
    if not resolved.tasks:
        raise SuiteError(f"no task of suite {suite.name!r} has expected values", "run `grpo-code tasks check` on it")
    return resolved
