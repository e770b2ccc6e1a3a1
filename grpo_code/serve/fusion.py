"""SandboxFusion's ``/run_code``, field for field, on our jobs.

A request runs one program once, with ``stdin``, and answers what it printed and how it
ended; the client (veRL's ``sandbox_fusion`` reward, SkyRL) compares the output itself. It
becomes a *record* job with one ``io`` test that has no expected output: the executor
runs the program as ``__main__`` under the same isolation and limits as every test, and
records its stdout and stderr (docs/sandbox.md, Jobs). Our verdict then maps onto
SandboxFusion's fields (:func:`response`); what they cannot say is in docs/sandbox.md,
"Serving".

Request: ``code`` (required), ``language`` (any name or alias in ``grpo_code/sandbox/languages.py``: ``python``, ``cpp``, ``nodejs``, ``go``, ``java``, ``rust``, ``typescript``, ``R``...),
``stdin``, ``run_timeout`` (seconds of CPU time, our time limit), ``compile_timeout``
(accepted and checked; compiling has the sandbox's own limit), ``memory_limit_MB`` (-1:
the sandbox's default), ``files`` and ``fetch_files`` (only empty: programs get no files).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from grpo_code.sandbox.languages import ALIASES, COMPILED
from grpo_code.sandbox.types import FieldError, Job, Result, Status, Verdict

LANGUAGES = ALIASES
"""SandboxFusion's language names (``python``, ``python3``, ``cpp``, ``nodejs``, ...) to ours."""
FIELDS = {"code", "language", "stdin", "run_timeout", "compile_timeout", "memory_limit_MB", "files",
          "fetch_files"}
MAX_TIMEOUT_S = 600
_EXIT = re.compile(r"^SystemExit\((-?\d+)\)")


class BadRequest(FieldError):
    """A request field that cannot be run (the 4xx answer quotes the field and the problem)."""


@dataclass(frozen=True)
class RunCode:
    """A checked ``/run_code`` request."""

    code: str
    language: str
    stdin: str
    run_timeout: float
    compile_timeout: float
    memory_mb: int | None

    def job(self) -> Job:
        limits: dict[str, Any] = {"timeout_s": self.run_timeout}
        if self.memory_mb is not None:
            limits["memory_mb"] = self.memory_mb
        return Job.from_dict({"program": self.code, "language": self.language, "record": True,
                              "tests": [{"kind": "io", "stdin": self.stdin}], "limits": limits})


def _seconds(body: dict[str, Any], key: str, default: float) -> float:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_TIMEOUT_S:
        raise BadRequest(key, f"{value!r} must be seconds in (0, {MAX_TIMEOUT_S}]")
    return float(value)


def parse(body: Any) -> RunCode:
    """The request, checked field by field (:class:`BadRequest` names the first bad one)."""
    if not isinstance(body, dict):
        raise BadRequest("body", "must be a JSON object")
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        raise BadRequest(unknown[0], f"is not a field of /run_code (fields: {', '.join(sorted(FIELDS))})")
    code = body.get("code")
    if not isinstance(code, str):
        raise BadRequest("code", "is required: the program's source as a string")
    language = body.get("language", "python")
    if not isinstance(language, str) or language not in LANGUAGES:
        raise BadRequest("language", f"{language!r} is not served (languages: {', '.join(sorted(LANGUAGES))})")
    stdin = body.get("stdin")
    if stdin is not None and not isinstance(stdin, str):
        raise BadRequest("stdin", "must be a string")
    memory = body.get("memory_limit_MB", -1)
    if memory is None or memory == -1:
        memory_mb = None
    elif isinstance(memory, bool) or not isinstance(memory, int) or not 16 <= memory <= 65_536:
        raise BadRequest("memory_limit_MB", f"{memory!r} must be -1 (the default) or an integer MB in [16, 65536]")
    else:
        memory_mb = memory
    for key in ("files", "fetch_files"):
        value = body.get(key)
        if value:
            raise BadRequest(key, "is not supported: programs run with no files of the client's "
                                  "(send an empty value)")
    return RunCode(code, LANGUAGES[language], stdin or "", _seconds(body, "run_timeout", 10.0),
                   _seconds(body, "compile_timeout", 10.0), memory_mb)


def _command(status: str, seconds: float | None, code: int | None, stdout: str = "", stderr: str = "") -> dict:
    return {"status": status, "execution_time": seconds, "return_code": code, "stdout": stdout, "stderr": stderr}


def _return_code(test: Any) -> int:
    """The exit status of a run that ended without passing: a ``sys.exit(n)`` says n; an
    uncaught exception, like Python's own, 1; a memory kill, like the kernel's OOM killer, 137."""
    if test.verdict is Verdict.MEMORY:
        return 137
    found = _EXIT.match(test.message or "")
    if found:
        return int(found.group(1))
    return 1


def response(request: RunCode, result: Result) -> dict[str, Any]:
    """SandboxFusion's ``RunCodeResponse`` for our result."""
    base = {"executor_pod_name": None, "files": {}}
    if result.status is Status.INFRA_ERROR or not result.tests:
        return {"status": "SandboxError", "message": result.error or "the sandbox did not run the program",
                "compile_result": None, "run_result": None, **base}
    test = result.tests[0]
    seconds = round(test.duration_ms / 1000, 6)
    compiled = request.language in COMPILED  # as SandboxFusion: interpreted languages have no compile step
    if test.verdict is Verdict.COMPILE_ERROR and compiled:
        return {"status": "Failed", "message": "", "run_result": None,
                "compile_result": _command("Finished", None, 1, "", test.message or test.stderr), **base}
    compile_result = _command("Finished", None, 0) if compiled else None
    if test.verdict is Verdict.TIMEOUT:
        run = _command("TimeLimitExceeded", seconds, None, test.stdout, test.stderr)
    elif test.verdict is Verdict.PASS:
        run = _command("Finished", seconds, 0, test.stdout, test.stderr)
    else:
        said = test.stderr + (test.message if test.message and not _EXIT.match(test.message) else "")
        run = _command("Finished", seconds, _return_code(test), test.stdout, said)
    ok = run["status"] == "Finished" and run["return_code"] == 0
    return {"status": "Success" if ok else "Failed", "message": "", "compile_result": compile_result,
            "run_result": run, **base}
