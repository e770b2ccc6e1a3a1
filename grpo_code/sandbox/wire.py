"""The wire format: a job as the executor receives it, in parts, with the host's deadline.

A :class:`~grpo_code.sandbox.types.Job` leaves the host as a JSON object whose limits are
resolved against the sandbox config (:func:`wire_for`: what a sandbox sends and a reward
cache key hashes). A large one is cut into parts that run one after another in one worker
(:func:`split_wire`), and the host waits for each at most :func:`job_deadline_s`.
"""

from __future__ import annotations

import json
import math
from typing import Any

from grpo_code.sandbox.executor.budget import cpu_budget_s
from grpo_code.sandbox.executor.kept import DEFAULT_JOB_BYTES
from grpo_code.sandbox.executor.pyjob import CHECKER_MIN_S
from grpo_code.sandbox.executor.zygote import REPLY_S as ZYGOTE_REPLY_S
from grpo_code.sandbox.languages import COMPILED
from grpo_code.sandbox.types import Job

JOB_PART_BYTES = 16 * 1024 * 1024
"""A job whose JSON is larger (tests with large expected values) runs as several parts of
at most this size, one after another in one worker, and comes back as one result."""
MAX_TEST_BYTES = 48 * 1024 * 1024
"""The largest one test may be; the containers' memory allows for a part this large."""


class Wire(dict):
    """A wire job (a plain dict on the wire) that keeps its job's tests encoded once
    (:attr:`Job.encoded_tests`), so sending it writes them out as they are."""

    encoded: Any = None


def own_encoding(wire: dict[str, Any]) -> Any:
    """The encoded tests a wire job carries, when its tests are still those (else None)."""
    encoded = getattr(wire, "encoded", None)
    return encoded if encoded is not None and wire.get("tests") is encoded.dicts else None


def wire_size(wire: dict[str, Any]) -> int:
    """Length of a wire job's JSON."""
    encoded = own_encoding(wire)
    if encoded is not None:
        return len(json.dumps({**wire, "tests": []})) - 2 + len(encoded.text)
    return len(json.dumps(wire))


def encode_message(mid: int, message: dict[str, Any]) -> bytes:
    """One JSON line to the executor; a :class:`Wire` job's tests go in as already encoded."""
    job = message.get("job")
    encoded = own_encoding(job) if isinstance(job, dict) else None
    if encoded is not None:
        rest = {k: v for k, v in job.items() if k != "tests"}
        rest["tests"] = 0  # last in the job, and the job last in the message: the 0 ends the text
        head = json.dumps({"id": mid, **{k: v for k, v in message.items() if k != "job"}, "job": rest})
        return (head[:-3] + encoded.text + "}}\n").encode()
    return (json.dumps({"id": mid, **message}) + "\n").encode()


def wire_job(
    job: Job,
    timeout_s: float,
    memory_mb: int,
    max_output_bytes: int,
    file_size_mb: int,
    compile_timeout_s: float = 10.0,
    compile_memory_mb: int = 1024,
    max_job_output_bytes: int = DEFAULT_JOB_BYTES,
    record_output_bytes: int | None = None,
) -> dict[str, Any]:
    """The job as the executor receives it: limits resolved against the config."""
    out = Wire(job.to_dict())
    out.encoded = job.encoded_tests
    out["limits"] = {
        "timeout_s": job.limits.timeout_s if job.limits.timeout_s is not None else timeout_s,
        "memory_mb": job.limits.memory_mb if job.limits.memory_mb is not None else memory_mb,
        "max_output_bytes": max_output_bytes,
        "file_size_mb": file_size_mb,
        "max_job_output_bytes": max_job_output_bytes,
    }
    if job.record and record_output_bytes is not None:  # only a record job keeps a whole stdout
        out["limits"]["record_output_bytes"] = record_output_bytes
    if job.language in COMPILED:
        out["limits"]["compile_timeout_s"] = compile_timeout_s
        out["limits"]["compile_memory_mb"] = compile_memory_mb
    return out


def wire_for(job: Job, config: Any) -> dict[str, Any]:
    """``wire_job`` with the limits of a ``SandboxConfig``: what a sandbox sends and a cache key hashes."""
    return wire_job(job, config.timeout_s, config.memory_mb, config.max_output_kb * 1024, config.file_size_mb,
                    config.compile_timeout_s, config.compile_memory_mb, config.max_job_output_kb * 1024,
                    config.record_output_kb * 1024)


UNDECIDED = "undecided"
"""A test's verdict from the executor when its answer is not the held expected value's
exact bytes, and the flag of such a result: the host sends the job again with the value
(never a verdict of its own)."""


def held_wire(wire: dict[str, Any]) -> dict[str, Any] | None:
    """The wire job with its large expected values held back (their digests travel), or
    ``None`` when it has none (:attr:`~grpo_code.sandbox.encoded.EncodedTests.held`)."""
    encoded = own_encoding(wire)
    if encoded is None or encoded.held is None:
        return None
    held = Wire({**wire})
    held.encoded = encoded.held
    held["tests"] = encoded.held.dicts
    return held


def split_wire(wire: dict[str, Any], part_bytes: int = JOB_PART_BYTES) -> list[dict[str, Any]] | str:
    """The wire job as parts of at most ``part_bytes`` of JSON (usually one part: itself),
    or a message when one test alone is over :data:`MAX_TEST_BYTES`."""
    encoded = own_encoding(wire)
    if wire_size(wire) <= part_bytes:
        return [wire]
    base = len(json.dumps({**wire, "tests": []}))
    sizes = [len(t) for t in encoded.texts] if encoded is not None else [len(json.dumps(t)) for t in wire["tests"]]
    bounds: list[tuple[int, int]] = []
    first, size = 0, base
    for i, n in enumerate(sizes):
        n += 2
        if n > MAX_TEST_BYTES:
            return (f"test {i} is {n / 2**20:.1f} MiB of JSON, over the {MAX_TEST_BYTES >> 20} MiB limit of one test "
                    "(docs/sandbox.md, Values)")
        if i > first and size + n > part_bytes:
            bounds.append((first, i))
            first, size = i, base
        size += n
    bounds.append((first, len(sizes)))
    parts: list[dict[str, Any]] = []
    budget = wire["limits"].get("max_job_output_bytes", DEFAULT_JOB_BYTES)
    for start, end in bounds:
        # Each part is a job to the executor: its share of the output budget, by its tests,
        # keeps the result the parts make together within the job's.
        limits = {**wire["limits"], "max_job_output_bytes": budget * (end - start) // len(sizes)}
        if encoded is None:
            parts.append({**wire, "limits": limits, "tests": wire["tests"][start:end]})
            continue
        part = Wire({**wire, "limits": limits})
        part.encoded = encoded.part(start, end)
        part["tests"] = part.encoded.dicts
        parts.append(part)
    return parts


def job_deadline_s(wire: dict[str, Any]) -> float:
    """How long the host waits for a job before it declares the sandbox hung."""
    # Time limits are on CPU time; the wall clock of a test on a loaded machine can be a
    # few times its limit (the executor's own backstop is 10x), so allow 4x here.
    # Judging what a test returned has a CPU budget of its own (executor/budget.py); a
    # checker may take max(10 s, 2 x timeout_s) (executor/pyjob.py); a Python test's
    # process is reported by the zygote, which a leftover process can hold up for up to
    # ZYGOTE_REPLY_S before it is replaced. None of that may be the program's way to an
    # infra_error, so all of it is allowed for.
    timeout_s = float(wire["limits"]["timeout_s"])
    per_test = 4 * (timeout_s + cpu_budget_s(timeout_s)) + 1.0
    if wire.get("language", "python") == "python":
        per_test += ZYGOTE_REPLY_S
    checking = sum(1 for t in wire["tests"] if t.get("checker")) * max(CHECKER_MIN_S, 2 * timeout_s)
    deadline = 10.0 + math.ceil((per_test * len(wire["tests"]) + checking) * 1.2)
    if "compile_timeout_s" in wire["limits"]:
        # at most one build per test kind (C++: the program alone for io, with the call harness
        # for call tests), and two for script tests (the judge and the program's server, or
        # the judge and then the in-process binary where the judge does not compile)
        kinds = {t["kind"] for t in wire["tests"]}
        builds = len(kinds) + ("script" in kinds)
        deadline += builds * (float(wire["limits"]["compile_timeout_s"]) + 2.0)
    return deadline


def total_deadline_s(wire: dict[str, Any]) -> float:
    """How long a caller waits for a job's result in all: a job with held-back expected
    values may be sent twice (:func:`held_wire`), each sending under its own deadline."""
    encoded = own_encoding(wire)
    return job_deadline_s(wire) * (2 if encoded is not None and encoded.held is not None else 1)
