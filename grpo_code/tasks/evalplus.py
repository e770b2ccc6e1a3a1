"""The ``evalplus`` adapter: HumanEval+ and MBPP+ releases, judged as evalplus judges them.

A record gives the problem, a reference (``canonical_solution``) and inputs only
(``base_input``, ``plus_input``); the expected outputs are what the reference returns,
computed in the sandbox by a reference oracle (grpo_code/verify/oracle.py). Each input is
one ``call`` test compared as evalplus does (``compare: python``: Python's ``==``, then,
for float answers or a record ``atol``, the same type and numbers within ``atol`` + 1e-7
relative). What evalplus decides by a special rule is a checker here:

- HumanEval/32 ``find_zero``: any x with |poly(xs, x)| <= atol;
- MBPP+ tasks whose answer is a set given as a list (``similar_elements`` ...): ``set(out) == set(exp)``;
- ``surface_Area`` (Mbpp/581), ``digit_distance_nums`` (Mbpp/558): the reference's answer
  or the one of the formula the statement also allows; ``sum_div``: the answer or 0;
  ``are_equivalent``: any answer;
- MBPP+ tasks whose reference returns a regex match (``check_str`` ...): the answer must be
  None exactly when the reference's is. A match object is not a value, so these are script
  tests that call the reference in the judge.

MBPP+ inputs are JSON, so evalplus turns some back into tuples, sets and complex numbers
per task; :func:`mbpp_inputs` does the same. ``tests`` selects ``base``, ``plus`` or
``all`` (default) inputs; ``metadata.test_groups`` says how many of each.
"""

from __future__ import annotations

from typing import Any

from grpo_code.errors import SuiteError
from grpo_code.sandbox.values import suite_tree
from grpo_code.tasks.examples import docstring_examples, prompt_assert
from grpo_code.tasks.helpers import prompt_helpers
from grpo_code.tasks.records import Record, RecordError, convert_each, first_key

# MBPP+ tasks (by number) whose JSON inputs evalplus turns back into other types.
_TUPLE_ARGS = {2, 116, 132, 143, 222, 261, 273, 394, 399, 421, 424, 429, 470, 560, 579, 596, 616, 630, 726, 740,
               744, 809}
_TUPLES_IN_LIST_ARGS = {63, 64, 70, 94, 120, 237, 272, 299, 400, 409, 417, 438, 473, 614, 780}
_FIRST_LIST_OF_TUPLES = {75, 413, 444, 753}
_SECOND_TUPLE = {106, 750}
_FIRST_TUPLE = {250, 405, 446, 617, 720, 763, 808}
_NESTED_TUPLES = {259, 401, 445}
_ALL_TUPLES = {580, 615, 791}

SET_EQUAL = ("similar_elements", "find_char_long", "common_in_nested_lists", "extract_singly", "larg_nnum",
             "intersection_array", "find_dissimilar", "Diff")
NOT_NONE = ("check_str", "text_match_three", "text_starta_endb")

_CHECKERS = {
    "set_equal": "def check(args, expected, output):\n"
                 "    try:\n        return set(output) == set(expected)\n"
                 "    except TypeError:\n        return False\n",
    "or_zero": "def check(args, expected, output):\n    return output == expected or output == 0\n",
    "any": "def check(args, expected, output):\n    return True\n",
    "surface_area": "import math\n\n"
                    "def check(args, expected, output):\n"
                    "    base, height = args\n"
                    "    slant = math.sqrt((base / 2) ** 2 + height ** 2)\n"
                    "    other = round(base ** 2 + 4 * (base * slant) / 2)\n"
                    "    try:\n        return output == expected or abs(output - other) <= ATOL\n"
                    "    except TypeError:\n        return False\n",
    "digit_distance": "def check(args, expected, output):\n"
                      "    a, b = (str(x) for x in args)\n"
                      "    width = max(len(a), len(b))\n"
                      "    other = sum(abs(int(x) - int(y)) for x, y in zip(a.zfill(width), b.zfill(width)))\n"
                      "    return output == expected or output == other\n",
    "root": "import math\n\n"
            "def check(args, expected, output):\n"
            "    xs = args[0]\n"
            "    try:\n"
            "        return abs(sum(c * math.pow(output, i) for i, c in enumerate(xs))) <= ATOL\n"
            "    except (TypeError, ValueError, OverflowError):\n        return False\n",
}


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def mbpp_inputs(number: int, inputs: list) -> list:
    """MBPP+ task ``number``'s argument lists with the types its reference expects."""
    out = []
    for args in inputs:
        if number in _TUPLE_ARGS:
            args = [tuple(a) for a in args]
        elif number in _TUPLES_IN_LIST_ARGS or number in _NESTED_TUPLES:
            args = [[tuple(x) for x in a] for a in args]
            if number in _NESTED_TUPLES:
                args = [tuple(a) for a in args]
        elif number in _FIRST_LIST_OF_TUPLES:
            args = [[tuple(x) for x in args[0]], args[1]]
        elif number in _SECOND_TUPLE:
            args = [args[0], tuple(args[1])]
        elif number in _FIRST_TUPLE:
            args = [tuple(args[0]), args[1]]
        elif number == 115:
            args = [[set(x) if isinstance(x, list) and x else {} for x in args[0]]]
        elif number == 124:
            args = [float(args[0]), complex(args[1])]
        elif number == 252:
            args = [complex(args[0])]
        elif number == 278:
            args = [tuple(tuple(x) if isinstance(x, list) else x for x in args[0])]
        elif number == 307:
            args = [tuple(args[0]), args[1], args[2]]
        elif number == 722:
            args = [{k: tuple(v) for k, v in args[0].items()}, *args[1:]]
        elif number in _ALL_TUPLES:
            args = list(_tuples(args))
        out.append(list(args))
    return out


def _checker_for(entry: str, dataset: str) -> str | None:
    if dataset == "humaneval":
        return "root" if entry == "find_zero" else None
    if entry in SET_EQUAL:
        return "set_equal"
    return {"sum_div": "or_zero", "are_equivalent": "any", "surface_Area": "surface_area",
            "digit_distance_nums": "digit_distance"}.get(entry)


def _not_none_test(entry: str, reference: str, args: list) -> dict:
    """A script test for a task whose reference returns a match object: the judge runs the
    reference (trusted suite code) and the program's answer must be None when, and only
    when, the reference's is (a bool answer must equal the reference's bool)."""
    call = ", ".join(repr(a) for a in args)
    code = (f"_reference_ns = {{}}\nexec({reference!r}, _reference_ns)\n"
            f"_want = _reference_ns[{entry!r}]({call})\n"
            "_want = _want if isinstance(_want, bool) else _want is not None\n"
            f"_got = {entry}({call})\n"
            "assert (_got == _want) if isinstance(_got, bool) else (_want == (_got is not None)), "
            "f'returned {_got!r}; the reference says {_want}'\n")
    return {"kind": "script", "code": code}


def evalplus(records: list[Record], source: str = "evalplus", tests: str = "all") -> list[Record]:
    """HumanEval+ (``HumanEval/N``: complete the prompt) and MBPP+ (``Mbpp/N``: write the
    function the docstring describes) records, one ``call`` test per input."""
    if tests not in ("all", "base", "plus"):
        raise SuiteError(f"--tests {tests!r} is not base, plus or all", "evalplus inputs come as base and plus")
    hint = "is this an evalplus release file (HumanEval+ or MBPP+)?"

    def one(r: Record, i: int, where: str) -> Record:
        for key in ("task_id", "prompt", "entry_point", "canonical_solution", "base_input", "plus_input"):
            if r.get(key) is None:
                raise RecordError(f"{where}: {key}", "missing", hint)
        for key in ("prompt", "entry_point", "canonical_solution"):
            if not isinstance(r[key], str):
                raise RecordError(f"{where}: {key}", f"is {type(r[key]).__name__}, expected a string", hint)
        task_id = str(r["task_id"])
        dataset = "humaneval" if task_id.startswith("HumanEval/") else "mbpp"
        entry = r["entry_point"]
        try:
            atol = float(r.get("atol") or 0)
        except (TypeError, ValueError):
            raise RecordError(f"{where}: atol", f"{r['atol']!r} is not a number", hint) from None
        # MBPP+ v0.2.0 has `"plus_input": {}` for Mbpp/793: no inputs, as evalplus reads it.
        groups = {k: ([] if r[f"{k}_input"] == {} else r[f"{k}_input"]) for k in ("base", "plus")}
        for name, inputs in groups.items():
            if not isinstance(inputs, list) or not all(isinstance(a, list) for a in inputs):
                raise RecordError(f"{where}: {name}_input", "must be a list of argument lists", "check the file")
        if dataset == "mbpp":
            try:
                number = int(task_id.split("/")[-1])
            except ValueError:
                raise RecordError(f"{where}: task_id", f"{task_id!r} is not Mbpp/N", "check the file") from None
            for name, inputs in groups.items():
                try:
                    groups[name] = mbpp_inputs(number, inputs)
                except (TypeError, ValueError, AttributeError, IndexError, KeyError):
                    raise RecordError(f"{where}: {name}_input", f"does not have the argument types evalplus "
                                      f"gives Mbpp/{number}", "check the file") from None
        chosen = {k: v for k, v in groups.items() if tests in ("all", k)}
        run_reference = dataset == "mbpp" and entry in NOT_NONE  # its tests run the reference: no oracle
        reference = (r["prompt"] + r["canonical_solution"]) if dataset == "humaneval" else r["canonical_solution"]
        checker = _checker_for(entry, dataset)
        task_tests = []
        for inputs in chosen.values():
            for args in inputs:
                if run_reference:
                    task_tests.append(_not_none_test(entry, reference, args))
                    continue
                test: Record = {"kind": "call", "fn": entry, "args": suite_tree(args), "compare": "python"}
                if atol:
                    test["abs_tol"] = atol
                if checker:
                    test["checker"] = checker
                task_tests.append(test)
        if not task_tests:
            group = "base" if tests == "all" else tests
            raise RecordError(f"{where}: {group}_input", f"no {tests} inputs", "choose --tests all")
        task: Record = {
            "id": task_id,
            "prompt": r["prompt"] if dataset == "humaneval" else _mbpp_prompt(r["prompt"]),
            "language": "python",
            "mode": "complete" if dataset == "humaneval" else "instruct",
            "entry_point": entry,
            "reference": reference,
            "tests": task_tests,
            # evalplus's time rule needs the oracle's timing of the reference
            "limits": {"timeout_s": 10} if run_reference else {"timeout_s": 10, "reference_factor": 4},
            "metadata": {"source": f"{dataset}+", "split": "test",
                         "test_groups": {k: len(v) for k, v in chosen.items()}},
        }
        public = docstring_examples(r["prompt"], entry) if dataset == "humaneval" else prompt_assert(r["prompt"])
        if public:
            task["public_tests"] = public
        if checker:
            task["checkers"] = {checker: _CHECKERS[checker].replace("ATOL", repr(atol))}
        helpers = prompt_helpers(r["prompt"], entry) if dataset == "humaneval" else None
        if helpers:  # for its script tests: the prompt's definitions, never the program's
            task["helpers"] = helpers
        return task

    return convert_each(records, source, one, first_key("task_id"))


def _mbpp_prompt(prompt: str) -> str:
    """MBPP+ prompts are a docstring holding the statement and one example assert."""
    text = prompt.strip()
    for quote in ('"""', "'''"):
        if text.startswith(quote) and text.endswith(quote):
            text = text[3:-3].strip()
    return text
