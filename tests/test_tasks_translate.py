"""``grpo-code tasks translate`` (grpo_code/tasks/translate.py): a Python call-test suite in
every language that takes call tests, its tests kept as data. Typed stubs render from the
hints and the tests' values, untranslatable tasks are skipped with the reason, and on docker
a hand-written right solution of each translated task passes in every language while a wrong
one fails."""

from __future__ import annotations

import pytest

from conftest import need_image
from grpo_code.config import SandboxConfig
from grpo_code.sandbox import Job, Sandbox, Status
from grpo_code.sandbox.languages import CALL_TESTS
from grpo_code.tasks.suite import suite_from_records
from grpo_code.tasks.translate import Untranslatable, signature, stub, translate, translate_all

ADD = 'def add(x: int, y: int) -> int:\n    """Add two numbers x and y\n    >>> add(2, 3)\n    5\n    """\n'
BELOW = ('from typing import List\n\n\ndef below_zero(operations: List[int]) -> bool:\n'
         '    """Does the balance, starting at zero, fall below zero?"""\n')
WORDS = 'def split_words(s):\n    """The words of s, split at whitespace."""\n'


def call(fn, args, expected):
    return {"kind": "call", "fn": fn, "args": args, "expected": expected}


RECORDS = [
    {"id": "t/add", "prompt": ADD, "mode": "complete", "entry_point": "add",
     "tests": [call("add", [2, 3], 5), call("add", [-7, 7], 0), call("add", [10**12, 1], 10**12 + 1)]},
    {"id": "t/below", "prompt": BELOW, "mode": "complete", "entry_point": "below_zero",
     "tests": [call("below_zero", [[]], False), call("below_zero", [[1, 2, -4, 5]], True),
               call("below_zero", [[1, -1, 2]], False)]},
    # no type hints: the tests' values say str -> list of str
    {"id": "t/words", "prompt": WORDS, "mode": "complete", "entry_point": "split_words",
     "tests": [call("split_words", ["a bc  d"], ["a", "bc", "d"]), call("split_words", [""], []),
               call("split_words", ["one"], ["one"])]},
]
SUITE = suite_from_records("t", RECORDS, "test")

# Bodies completing each stub of HumanEval+'s below_zero (3), strlen (23: characters, not
# bytes), words_string (101: words split at commas or whitespace) and x_or_y (150: x when n
# is prime, where HumanEval's reference counts every n below 1 as prime); None where the
# translation skips the task.
BODIES = {
    "go": [
        '\tb := 0\n\tfor _, o := range operations {\n\t\tb += o\n\t\tif b < 0 {\n\t\t\treturn true\n\t\t}\n\t}\n\treturn false\n}\n',
        '\tn := 0\n\tfor range string {\n\t\tn++\n\t}\n\treturn n\n}\n',
        '\tout := []string{}\n\tw := ""\n\tfor _, c := range s + " " {\n\t\tif c == \' \' || c == \',\' || c == \'\\t\' || c == \'\\n\' {\n\t\t\tif w != "" {\n\t\t\t\tout = append(out, w)\n\t\t\t}\n\t\t\tw = ""\n\t\t} else {\n\t\t\tw += string(c)\n\t\t}\n\t}\n\treturn out\n}\n',
        '\tif n == 1 {\n\t\treturn y\n\t}\n\tfor i := 2; i*i <= n; i++ {\n\t\tif n%i == 0 {\n\t\t\treturn y\n\t\t}\n\t}\n\treturn x\n}\n',
    ],
    "rust": [
        '    let mut b = 0;\n    for o in operations { b += o; if b < 0 { return true; } }\n    false\n}\n',
        '    string.chars().count() as i64\n}\n',
        "    s.split(|c: char| c == ',' || c.is_whitespace()).filter(|w| !w.is_empty()).map(|w| w.to_string()).collect()\n}\n",
        '    if n == 1 { return y; }\n    let mut i = 2;\n    while i * i <= n { if n % i == 0 { return y; } i += 1; }\n    x\n}\n',
    ],
    "java": [
        '        long b = 0;\n        for (long o : operations) { b += o; if (b < 0) return true; }\n        return false;\n    }\n}\n',
        '        return string.codePointCount(0, string.length());\n    }\n}\n',
        '        ArrayList<String> out = new ArrayList<>();\n        for (String w : s.split("[,\\\\s]+")) if (!w.isEmpty()) out.add(w);\n        return out;\n    }\n}\n',
        '        if (n == 1) return y;\n        for (long i = 2; i * i <= n; i++) if (n % i == 0) return y;\n        return x;\n    }\n}\n',
    ],
    "typescript": [
        '    let b = 0;\n    for (const o of operations) { b += o; if (b < 0) return true; }\n    return false;\n}\n',
        '    return [...string].length;\n}\n',
        '    return s.split(/[,\\s]+/).filter((w) => w.length > 0);\n}\n',
        '    if (n === 1) return y;\n    for (let i = 2; i * i <= n; i++) if (n % i === 0) return y;\n    return x;\n}\n',
    ],
    "cpp": [
        '    long b = 0;\n    for (long o : operations) { b += o; if (b < 0) return true; }\n    return false;\n}\n',
        None,
        "    for (auto &c : s) if (c == ',') c = ' ';\n    std::istringstream in(s);\n    std::vector<std::string> out;\n    std::string w;\n    while (in >> w) out.push_back(w);\n    return out;\n}\n",
        '    if (n == 1) return y;\n    for (long i = 2; i * i <= n; i++) if (n % i == 0) return y;\n    return x;\n}\n',
    ],
    "javascript": [
        '    let b = 0;\n    for (const o of operations) { b += o; if (b < 0) return true; }\n    return false;\n}\n',
        '    return [...string].length;\n}\n',
        '    return s.split(/[,\\s]+/).filter((w) => w.length > 0);\n}\n',
        '    if (n === 1) return y;\n    for (let i = 2; i * i <= n; i++) if (n % i === 0) return y;\n    return x;\n}\n',
    ],
    "ruby": [
        '  b = 0\n  operations.each { |o| b += o; return true if b < 0 }\n  false\nend\n',
        '  string.length\nend\n',
        '  s.split(/[,\\s]+/).reject(&:empty?)\nend\n',
        '  return y if n == 1\n  i = 2\n  while i * i <= n\n    return y if n % i == 0\n    i += 1\n  end\n  x\nend\n',
    ],
    "php": [
        '    $b = 0;\n    foreach ($operations as $o) { $b += $o; if ($b < 0) return true; }\n    return false;\n}\n',
        None,
        "    return preg_split('/[,\\s]+/', $s, -1, PREG_SPLIT_NO_EMPTY);\n}\n",
        '    if ($n == 1) return $y;\n    for ($i = 2; $i * $i <= $n; $i++) if ($n % $i == 0) return $y;\n    return $x;\n}\n',
    ],
    "perl": [
        None,
        '    return length $string;\n}\n',
        '    return [grep { length } split /[,\\s]+/, $s];\n}\n',
        '    return $y if $n == 1;\n    for (my $i = 2; $i * $i <= $n; $i++) { return $y if $n % $i == 0; }\n    return $x;\n}\n',
    ],
    "lua": [
        '    local b = 0\n    for _, o in ipairs(operations) do b = b + o if b < 0 then return true end end\n    return false\nend\n',
        '    return utf8.len(string)\nend\n',
        "    local out = {}\n    for w in s:gmatch('[^,%s]+') do out[#out + 1] = w end\n    return out\nend\n",
        '    if n == 1 then return y end\n    local i = 2\n    while i * i <= n do\n        if n % i == 0 then return y end\n        i = i + 1\n    end\n    return x\nend\n',
    ],
    "r": [
        '    length(operations) > 0 && any(cumsum(unlist(operations)) < 0)\n}\n',
        '    nchar(string)\n}\n',
        None,
        '    if (n == 1) return(y)\n    i <- 2\n    while (i * i <= n) {\n        if (n %% i == 0) return(y)\n        i <- i + 1\n    }\n    x\n}\n',
    ],
    "racket": [
        '  (let loop ([b 0] [ops operations])\n    (cond [(null? ops) #f]\n          [(< (+ b (car ops)) 0) #t]\n          [else (loop (+ b (car ops)) (cdr ops))])))\n',
        '  (string-length string))\n',
        '  (filter (lambda (w) (> (string-length w) 0)) (regexp-split #px"[,\\\\s]+" s)))\n',
        '  (cond [(= n 1) y]\n        [(for/or ([i (in-range 2 n)] #:break (> (* i i) n)) (zero? (remainder n i))) y]\n        [else x]))\n',
    ],
}
# A wrong strlen in each language: it counts bytes (HumanEval+ has strings with "ã").
WRONG = {
    "go": '\treturn len(string)\n}\n',
    "rust": '    string.len() as i64\n}\n',
    "java": '        return string.getBytes(java.nio.charset.StandardCharsets.UTF_8).length;\n    }\n}\n',
    "typescript": '    return unescape(encodeURIComponent(string)).length;\n}\n',
    "javascript": '    return Buffer.byteLength(string);\n}\n',
    "ruby": '  string.bytesize\nend\n',
    "perl": '    use bytes;\n    return length $string;\n}\n',
    "lua": '    return #string\nend\n',
    "r": '    nchar(string, type = "bytes")\n}\n',
    "racket": '  (bytes-length (string->bytes/utf-8 string)))\n',
}
HUMANEVAL_PLUS = ("HumanEval/3", "HumanEval/23", "HumanEval/101", "HumanEval/150")


def test_typed_stubs_follow_the_hints_and_the_docstring_becomes_a_comment() -> None:
    sig = signature(BELOW, "below_zero")
    assert stub("go", sig).endswith("func below_zero(operations []int) bool {\n")
    assert "// Does the balance" in stub("go", sig)
    assert stub("rust", sig).endswith("fn below_zero(operations: Vec<i64>) -> bool {\n")
    assert "public static boolean below_zero(ArrayList<Long> operations) {" in stub("java", sig)
    assert stub("typescript", sig).endswith("function below_zero(operations: number[]): boolean {\n")
    assert stub("cpp", sig).endswith("bool below_zero(std::vector<long> operations) {\n")
    assert stub("racket", sig).endswith("(define (below_zero operations)\n")


def test_types_the_hints_leave_open_come_from_the_tests_values() -> None:
    words = translate(SUITE.tasks[2], "go")
    assert words.prompt.endswith("func split_words(s string) []string {\n") and words.mode == "complete"
    assert [t.to_dict() for t in words.tests] == [t.to_dict() for t in SUITE.tasks[2].tests]
    assert words.language == "go" and words.reference is None and words.metadata["translated_from"] == "t/words"


def test_untranslatable_tasks_are_skipped_with_the_reason() -> None:
    script = suite_from_records("s", [{"id": "s/1", "prompt": ADD, "mode": "complete", "entry_point": "add",
                                       "tests": [{"kind": "script", "code": "assert add(1, 2) == 3"}]}], "test")
    with pytest.raises(Untranslatable, match="script tests"):
        translate(script.tasks[0], "go")
    with pytest.raises(Untranslatable, match="Bash takes no call tests"):
        translate(SUITE.tasks[0], "bash")
    anything = "from typing import Any\n\ndef f(x: Any) -> int:\n    pass\n"
    with pytest.raises(Untranslatable, match="Any"):
        signature(anything, "f")
    done, skipped = translate_all(list(SUITE.tasks), "perl")
    assert [t.id for t in done] == ["t/add", "t/words"] and "booleans" in skipped[0][1]
    done, skipped = translate_all(list(SUITE.tasks), "r")
    assert [t.id for t in done] == ["t/add", "t/below"] and "one-element vector" in skipped[0][1]


@pytest.fixture(scope="module")
def sandbox(docker_ready):
    for language in BODIES:
        need_image(language)
    with Sandbox(SandboxConfig(backend="docker", workers=2, timeout_s=5.0)) as sb:
        yield sb


@pytest.fixture(scope="module")
def humaneval_plus(sandbox):
    """HumanEval+'s four tasks of :data:`BODIES`, their expected values from the Python references."""
    from conftest import BENCH
    from grpo_code.tasks.adapters import convert_all
    from grpo_code.tasks.suite import Suite, converted_tasks
    from grpo_code.verify import oracle

    path = BENCH / "evalplus" / "HumanEvalPlus.jsonl.gz"
    if not path.is_file():
        pytest.skip(f"HumanEval+ not found at {path} (set GRPO_CODE_BENCHMARKS)")
    tasks, _ = converted_tasks(convert_all("evalplus", str(path)), str(path))
    by_id = {t.id: t for t in tasks}
    suite = Suite(name="he+", tasks=tuple(by_id[i] for i in HUMANEVAL_PLUS), language="python", mode="complete")
    resolved = oracle.prepare(suite, sandbox, log=lambda _: None)
    assert [t.id for t in resolved.tasks] == list(HUMANEVAL_PLUS)
    return list(resolved.tasks)


def sampled(tests: tuple) -> tuple:
    """The first 4 tests, every 250th after them, and the first with a non-ASCII string (the
    wrong strlen counts bytes): 9 of about 1000, the base tests among them."""
    some = tests[:4] + tests[4::250]
    wide = [t for t in tests if any(isinstance(a, str) and not a.isascii() for a in t.args)][:1]
    return some + tuple(t for t in wide if t not in some)


@pytest.mark.docker
def test_hand_written_solutions_of_translated_humaneval_plus_pass_and_a_wrong_one_fails(sandbox, humaneval_plus):
    """Every language that takes call tests, on HumanEval+'s below_zero, strlen, words_string and
    x_or_y (at least three in each): the translated tests are the Python suite's with the
    canonical solutions' expected values, and a sample of them (:func:`sampled`) judges a
    right solution pass and a wrong strlen (bytes) fail, every test attested."""
    assert set(BODIES) == set(CALL_TESTS) - {"python"}
    jobs, names = [], []
    for language, bodies in BODIES.items():
        done, _ = translate_all(humaneval_plus, language)
        by_id = {t.id: t for t in done}
        for source, body in zip(humaneval_plus, bodies):
            task = by_id.get(source.id)
            assert (task is None) == (body is None), (language, source.id)
            if task is None:
                continue
            assert [(t.fn, t.args, t.expected) for t in task.tests] == [(t.fn, t.args, t.expected) for t in source.tests]
            assert task.prompt.strip() and task.reference is None
            sample = sampled(task.tests)
            jobs.append(Job(task.prompt + body, sample, language=language))
            names.append((language, source.id, "right"))
        if language in WRONG:
            task = by_id["HumanEval/23"]
            jobs.append(Job(task.prompt + WRONG[language], sampled(task.tests), language=language))
            names.append((language, "HumanEval/23", "wrong"))
    assert all(sum(n[0] == language and n[2] == "right" for n in names) >= 3 for language in BODIES)
    results = sandbox.run(jobs)
    for name, result in zip(names, results):
        expected = Status.PASS if name[2] == "right" else Status.FAIL
        assert result.status is expected, (name, result)
        assert all(t.attested for t in result.tests), (name, result)
