"""Execution feedback for another turn: what failed, in words the model can act on.

A program is checked against its task's public tests (``Task.public_tests``: examples the
model may see). When one fails, :func:`feedback` writes a user message from a template:
the failing test's input, its expected output and what the program did (returned,
printed or raised), each cut to ``limit`` characters. A task with no public test gets
feedback only when its program does not compile (the compiler's message names no test).
Hidden tests never reach a message: only public tests are quoted, and the one thing said of
a hidden run is that it did not compile.
"""

from __future__ import annotations

from typing import Any

from grpo_code.sandbox.executor import codec
from grpo_code.sandbox.types import CallTest, IoTest, Result, ScriptTest, Status, TestResult
from grpo_code.tasks.prompts import language_names
from grpo_code.verify.failure import clip, failure_of

DEFAULT_TEMPLATE = (
    "{failure}\n\nFix the program. Reply with the whole corrected program in one ```{fence} code block."
)
"""The user turn after a failed check; it may use {failure}, {language_name} and {fence}."""
NO_CODE = "Your reply has no ```{fence} code block, so nothing could be run."
UNFINISHED = ("Your reply was cut at the length limit before its ```{fence} code block closed, so the "
              "unfinished program was not run. Write a shorter program.")
LIMIT = 400
"""Characters kept of each quoted input, expected output and actual output."""


def _value(tree: Any) -> str:
    try:
        return repr(codec.from_tree(tree, plain_objects=True))
    except Exception:  # a value the host cannot rebuild: show its stored form
        return repr(tree)


def describe(test: Any, outcome: TestResult, limit: int = LIMIT) -> str:
    """One failed public test: input, expected output, what the program did."""
    verdict = outcome.verdict.value.replace("_", " ")
    said = clip(outcome.why.strip(), limit)
    if isinstance(test, CallTest):
        call = f"{test.fn}({', '.join(_value(a) for a in test.args)})"
        lines = [f"The test call {clip(call, limit)} failed ({verdict}).",
                 f"Expected: {clip(_value(test.expected), limit)}"]
        lines.append(f"Got: {said}" if said else "")
    elif isinstance(test, IoTest):
        lines = [f"The test with this input failed ({verdict}):", clip(test.stdin, limit),
                 "Expected output:", clip(test.stdout or "", limit),
                 "Your program printed:", clip(outcome.stdout, limit) or "(nothing)"]
        if said and outcome.verdict.value != "fail":
            lines += ["Error:", said]
    elif isinstance(test, ScriptTest):
        lines = [f"This test failed ({verdict}):", clip(test.code, limit)]
        if said:
            lines += ["Error:", said]
    else:  # pragma: no cover - every test kind is above
        lines = [f"A test failed ({verdict})."]
    return "\n".join(line for line in lines if line)


def failure_text(task: Any, public: Result | None, compile_error: str | None = None,
                 limit: int = LIMIT) -> str | None:
    """What to tell the model of its program, or ``None`` when there is nothing to fix.

    ``public``: the program's run on the public tests (``None`` when the task has none).
    ``compile_error``: the compiler's message when the run on the hidden tests found that
    the program does not compile (a task without public tests hears of nothing else)."""
    if public is not None:
        if public.status is Status.PASS:
            return None
        failure = failure_of(public, limit)
        if failure is not None and failure.outcome is not None and failure.test is not None:
            return describe(task.public_tests[failure.test], failure.outcome, limit)
        return f"The program could not be run: {failure.message}" if failure and failure.message else None
    if compile_error is None:
        return None
    # Python compiles the program alone, so its message quotes only the program; other
    # languages compile it with the tests' harness, whose lines a message could quote.
    said = clip(compile_error.strip(), limit) if task.language == "python" else ""
    return f"The program does not compile:\n{said}" if said else "The program does not compile."


def unfinished(task: Any) -> str:
    """What to tell an answer cut at the length limit before its code block closed."""
    return UNFINISHED.format(**language_names(task.language))


def no_code(task: Any) -> str:
    """What to tell an answer that has no code block."""
    return NO_CODE.format(**language_names(task.language))


def feedback(task: Any, failure: str | None, template: str = DEFAULT_TEMPLATE) -> str:
    """The user message for another turn: ``failure`` (``None``: no code block) in ``template``."""
    return template.format(failure=failure if failure is not None else no_code(task), **language_names(task.language))


def turns(answers: list[str], notes: list[str]) -> list[dict[str, str]]:
    """The chat after the task's prompt: each answer, then the feedback on it (the last
    answer may have none yet)."""
    out = []
    for i, answer in enumerate(answers):
        out.append({"role": "assistant", "content": answer})
        if i < len(notes):
            out.append({"role": "user", "content": notes[i]})
    return out


def check_template(template: str) -> None:
    """Refuse a feedback template that cannot be filled (before any generation starts)."""
    from grpo_code.errors import ConfigError

    try:
        template.format(failure="", language_name="", fence="")
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError([f"feedback template {template[:40]!r}... cannot be filled ({exc}): it may use "
                           "{failure}, {language_name} and {fence}; double literal braces"]) from None
    if "{failure}" not in template:
        raise ConfigError([f"feedback template {template[:40]!r}... has no {{failure}}: the model would not see "
                           "what failed"])
