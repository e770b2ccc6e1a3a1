"""Code extraction on realistic completions (several are SmolLM2-135M-Instruct samples)."""

from __future__ import annotations

import pytest

from grpo_code.sandbox.types import ScriptTest
from grpo_code.tasks import Task, build_program, extract_code
from grpo_code.tasks.extract import continuation, fenced_blocks

# Sampled from SmolLM2-135M-Instruct on MBPP/HumanEval prompts rendered by grpo-code.
SMOL_PROSE_THEN_TWO_BLOCKS = (
    "Here is a Python solution using set operations and a list comprehension:\n\n```python\n"
    "def find_common_elements(list1, list2):\n    return set(list1) & set(list2)\n\n"
    "print(find_common_elements((3, 4), (4, 5)))\n```\n\nAlternatively, you can use the built-in "
    "`set.intersection()` function:\n\n```python\ndef find_common_elements(list1, list2):"
)
SMOL_BLOCK_THEN_PROSE = (
    "```python\ndef square_nums(lst):\n    \"\"\"\n    Calculate and return the squares.\n    \"\"\"\n"
    "    return [n ** 2 for n in lst]\n```\n\nThis function utilizes the built-in `*` operator to multiply "
    "all elements of a list by itself and returns a list of squares."
)
SMOL_EXAMPLE_USAGE_BLOCK = (
    "Here's a complete Python function that can be used to truncate a float:\n\n```python\n"
    "def truncate_number(num: float) -> float:\n    return num % 1.0\n```\n\nThis function uses the `float` "
    "function.\n\nExample usage:\n\n```python\nprint(truncate_number(3.5))  # Output: 0.5\n```"
)


def test_single_fenced_block_with_prose_after() -> None:
    got = extract_code(SMOL_BLOCK_THEN_PROSE)
    assert got.how == "fenced"
    assert got.program.startswith("def square_nums(lst):") and got.program.rstrip().endswith("for n in lst]")


def test_first_or_last_block_by_config() -> None:
    first = extract_code(SMOL_EXAMPLE_USAGE_BLOCK, which="first")
    last = extract_code(SMOL_EXAMPLE_USAGE_BLOCK, which="last")
    assert "def truncate_number" in first.program
    assert last.program.startswith("print(truncate_number(3.5))")


def test_truncated_last_block_still_counts() -> None:
    last = extract_code(SMOL_PROSE_THEN_TWO_BLOCKS, which="last")
    assert last.program == "def find_common_elements(list1, list2):"
    first = extract_code(SMOL_PROSE_THEN_TWO_BLOCKS, which="first")
    assert "return set(list1) & set(list2)" in first.program


def test_language_tags() -> None:
    text = "```js\nconsole.log(1)\n```\n```py\nx = 1\n```\n```\ny = 2\n```"
    assert fenced_blocks(text) == ["x = 1\n"]
    assert fenced_blocks("```\ny = 2\n```") == ["y = 2\n"]  # untagged blocks when nothing is tagged
    assert fenced_blocks("```Python3\nz = 3\n```") == ["z = 3\n"]
    assert extract_code("```javascript\nconsole.log(1)\n```").how == "none"


def test_unfenced_code_with_prose_around() -> None:
    text = "Sure! Here it is:\ndef add(a, b):\n    return a + b\nThis adds the numbers a and b together."
    got = extract_code(text)
    assert got.how == "unfenced"
    assert got.program == "def add(a, b):\n    return a + b\n"


def test_unfenced_imports_are_kept() -> None:
    got = extract_code("import math\n\ndef f(x):\n    return math.sqrt(x)\n")
    assert got.program.startswith("import math")


@pytest.mark.parametrize("text", ["", "   \n", "I cannot help with that.", "The answer is 42.", "```python\n```",
                                  "```python\n   \n```"])
def test_no_code_is_a_distinct_outcome(text: str) -> None:
    got = extract_code(text)
    assert got.program is None and got.how == "none" and not got.ok


def test_continuation_stops_at_top_level_line() -> None:
    body = "    return a + b\n\n\ndef other():\n    pass\n\nprint(add(1, 2))\n"
    assert continuation(body) == "    return a + b\n"
    assert continuation("    x = 1\n    return x\nThis function returns one.") == "    x = 1\n    return x\n"
    assert continuation("    return 1\n```\nexplanation") == "    return 1\n"


def _complete_task() -> Task:
    prefix = "from typing import List\n\n\ndef total(xs: List[int]) -> int:\n    \"\"\"Sum.\"\"\"\n"
    return Task("t/1", prefix, (ScriptTest("assert total([1, 2]) == 3"),), mode="complete", entry_point="total")


def test_build_program_raw_continuation() -> None:
    task = _complete_task()
    got = build_program(task, "    return sum(xs)\n\n\nif __name__ == '__main__':\n    print(1)\n", style="raw")
    assert got.how == "continuation"
    assert got.program == task.prompt + "    return sum(xs)\n"
    assert build_program(task, "\nThis is prose.", style="raw").program is None


def test_build_program_chat_complete_mode_keeps_prompt_imports() -> None:
    task = _complete_task()
    got = build_program(task, "```python\ndef total(xs: List[int]) -> int:\n    return sum(xs)\n```")
    assert got.program.startswith("from typing import List\n")
    assert "return sum(xs)" in got.program


def test_build_program_chat_body_only_continues_the_prefix() -> None:
    task = _complete_task()
    got = build_program(task, "```python\n    return sum(xs)\n```")
    assert got.program == task.prompt + "    return sum(xs)\n"


def test_build_program_raw_instruct_reads_until_the_fence() -> None:
    task = Task("t/2", "Write f.", (ScriptTest("assert f() == 1"),), entry_point="f")
    got = build_program(task, "def f():\n    return 1\n```\n\nExplanation.", style="raw")
    assert got.program == "def f():\n    return 1\n"


# SmolLM2 samples on demo tasks: a usage block after the solution, and code without an opening fence.
SMOL_USAGE_AFTER = ("```python\ndef is_even(n):\n    return n % 2 == 0\n```\n\nExample usage:\n```python\n"
                    "print(is_even(2))  # True\n```")
SMOL_STRAY_CLOSING_FENCE = ("Here's a Python function that meets your requirements:\ndef count_vowels(s):\n"
                            "    return sum(1 for c in s if c in 'aeiou')\n\n# Example usage:\nprint(count_vowels(\"a\"))\n"
                            "```\nThis function works by first creating a set of all vowels.")


def test_blocks_defining_the_entry_point_win() -> None:
    assert extract_code(SMOL_USAGE_AFTER, which="last").program.startswith("print(")
    got = extract_code(SMOL_USAGE_AFTER, which="last", entry_point="is_even")
    assert got.program.startswith("def is_even(n):")
    task = Task("t", "Write is_even.", (ScriptTest("assert is_even(2)"),), entry_point="is_even")
    assert build_program(task, SMOL_USAGE_AFTER).program.startswith("def is_even")


def test_unfenced_solution_beats_a_prose_block_after_a_stray_fence() -> None:
    got = extract_code(SMOL_STRAY_CLOSING_FENCE, entry_point="count_vowels")
    assert got.how == "unfenced" and got.program.startswith("def count_vowels(s):")
    assert "This function works" not in got.program


def test_a_complete_defining_block_beats_a_truncated_later_one() -> None:
    text = ("```python\ndef clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n```\n\nAnother way:\n\n"
            "```python\ndef clamp(x, lo=5, hi=10):\n    if lo <= x")
    assert extract_code(text, entry_point="clamp").program == "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"
    assert extract_code(text).program.startswith("def clamp(x, lo=5")  # without an entry point: the last block


@pytest.mark.parametrize(("text", "cut"), [
    (SMOL_BLOCK_THEN_PROSE, False),                                       # closed block, prose after
    ("```python\ndef f():\n    while True:\n        x", True),           # never closed
    (SMOL_PROSE_THEN_TWO_BLOCKS, True),                                   # the last block is open
    ("def f():\n    return 1\n\nThis returns one.", False),              # unfenced, prose after
    ("def f():\n    return 1\n", True),                                   # unfenced, nothing after
    ("def f():\n    x = 1\n    if x:", True),                             # unfenced, cut mid-statement
])
def test_extraction_says_whether_the_program_runs_to_the_end(text: str, cut: bool) -> None:
    assert extract_code(text).cut is cut


def test_a_closed_defining_block_before_an_open_one_is_not_cut() -> None:
    text = ("```python\ndef clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n```\n\nAnother way:\n\n"
            "```python\ndef clamp(x, lo=5, hi=10):\n    if lo <= x")
    assert not extract_code(text, entry_point="clamp").cut
    assert extract_code(text).cut


def test_build_program_keeps_the_cut_flag() -> None:
    task = _complete_task()
    assert not build_program(task, "    return sum(xs)\n\nprint(total([1]))\n", style="raw").cut
    assert build_program(task, "    s = 0\n    for x in xs:\n", style="raw").cut
    assert build_program(task, "```python\ndef total(xs: List[int]) -> int:\n    return sum(").cut
    instruct = Task("t/2", "Write f.", (ScriptTest("assert f() == 1"),), entry_point="f")
    assert not build_program(instruct, "def f():\n    return 1\n```\n\nExplanation.", style="raw").cut
    assert build_program(instruct, "def f():\n    return", style="raw").cut
