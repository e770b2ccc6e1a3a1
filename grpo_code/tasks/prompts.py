"""Prompt rendering: a task becomes chat messages (instruct models) or raw text (base models).

Training and eval render prompts here, so a reward and an eval number mean the same thing.
Rendering is deterministic: the same task, suite and options always give the same prompt.

- ``chat``: a system message and one user message that asks for a single fenced code block.
  A ``complete``-mode task (a code prefix) is shown inside a fence and the model is asked to
  return the whole code.
- ``raw``: the text a base model continues. ``complete`` tasks: the code prefix itself;
  ``instruct`` tasks: the problem followed by an opened code fence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grpo_code.errors import SuiteError
from grpo_code.sandbox.languages import FACTS

STYLES = ("chat", "raw")
LANGUAGE_NAMES = {k: v.display for k, v in FACTS.items()}
FENCES = {k: v.fence for k, v in FACTS.items()}

DEFAULT_SYSTEM_PROMPT = (
    "You are an expert {language_name} programmer. Reply with one ```{fence} code block that holds "
    "the complete solution."
)
INSTRUCT_TEMPLATE = "{prompt}\n\nWrite your solution as one ```{fence} code block."
COMPLETE_TEMPLATE = (
    "Complete the following {language_name} code. Reply with the whole code, the given part included, "
    "in one ```{fence} code block.\n\n```{fence}\n{prompt}\n```"
)


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt: ``messages`` for chat style, ``text`` for raw style."""

    style: str
    messages: tuple[dict[str, str], ...] = ()
    text: str = ""

    def for_trl(self) -> Any:
        """What TRL's GRPOTrainer takes in the ``prompt`` column (conversational or plain)."""
        return [dict(m) for m in self.messages] if self.style == "chat" else self.text


def language_names(language: str) -> dict[str, str]:
    """What templates call a language: ``{language_name}`` (prose) and ``{fence}`` (the code
    block's tag). Prompts and execution feedback fill their templates from this one table."""
    return {"language_name": LANGUAGE_NAMES.get(language, language), "fence": FENCES.get(language, language)}


def message_text(message: Any) -> str:
    """The text of one chat message (string content or a list of text parts)."""
    content = message.get("content", "") if isinstance(message, dict) else message
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def completion_text(completion: Any) -> str:
    """The text of a completion: a string, or the assistant messages of a conversation."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return message_text(completion)
    messages = list(completion)
    assistant = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
    return "\n".join(message_text(m) for m in (assistant or messages))


def _fill(template: str, **values: str) -> str:
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError) as exc:
        raise SuiteError(f"prompt template {template[:40]!r}... cannot be filled ({exc})",
                         "templates may use {prompt}, {language_name} and {fence}; double literal braces") from None


def render(task: Any, style: str = "chat", system_prompt: str | None = None,
           prompt_template: str | None = None) -> Prompt:
    """Render ``task`` (a :class:`~grpo_code.tasks.schema.Task`) in ``style``.

    ``system_prompt`` and ``prompt_template`` (user message with ``{prompt}``) override the
    defaults; suites and the run config supply them.
    """
    if style not in STYLES:
        raise SuiteError(f"unknown prompt style {style!r}", "use chat (instruct models) or raw (base models)")
    names = language_names(task.language)
    if style == "raw":
        if task.mode == "complete":
            return Prompt("raw", text=task.prompt)
        return Prompt("raw", text=f"{task.prompt.rstrip()}\n\n```{names['fence']}\n")
    template = prompt_template or (COMPLETE_TEMPLATE if task.mode == "complete" else INSTRUCT_TEMPLATE)
    user = _fill(template, prompt=task.prompt.rstrip("\n"), **names)
    system = _fill(system_prompt if system_prompt is not None else DEFAULT_SYSTEM_PROMPT, prompt="", **names)
    messages = ({"role": "system", "content": system},) if system else ()
    return Prompt("chat", messages=(*messages, {"role": "user", "content": user}))
