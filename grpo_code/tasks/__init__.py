"""Task suites: the task schema, suite loading, public-format adapters, prompt rendering
and code extraction. See docs/tasks.md for the formats."""

from grpo_code.tasks.extract import Extraction, build_program, extract_code
from grpo_code.tasks.prompts import Prompt, render
from grpo_code.tasks.schema import Task, task_from_dict
from grpo_code.tasks.suite import Suite, list_suites, load_suite, write_suite

__all__ = [
    "Extraction",
    "Prompt",
    "Suite",
    "Task",
    "build_program",
    "extract_code",
    "list_suites",
    "load_suite",
    "render",
    "task_from_dict",
    "write_suite",
]
