"""The executor's pure parts: the verdict table (no forking) and the value codec."""

from __future__ import annotations

import collections
import decimal
import fractions
import math
import signal

import pytest

from grpo_code.sandbox.executor import codec
from grpo_code.sandbox.executor.verdict import HarnessFailure, Outcome, decide

STARTED = b'{"event":"started"}\n'
SCRIPT = {"kind": "script", "code": "assert f() == 1"}
CALL = {"kind": "call", "fn": "f", "args": [], "expected": [1, 2]}
IO = {"kind": "io", "stdin": "", "stdout": "3\n"}


def exited(code: int) -> int:
    return code << 8


def killed(signum: int) -> int:
    return signum


def report(**event) -> bytes:
    import json

    return STARTED + (json.dumps(event) + "\n").encode()


def python(test, judge=None, **kw) -> Outcome:
    return Outcome(test, started_marker=True, judge=judge, limit_s=5.0, **kw)


@pytest.mark.parametrize(
    "outcome, verdict",
    [
        # script: the judge decides
        (python(SCRIPT, {"event": "completed"}, status=killed(9), report=STARTED, judge_status=exited(0)), "pass"),
        (python(SCRIPT, {"event": "assertion", "message": "x"}, status=killed(9), report=STARTED), "fail"),
        (python(SCRIPT, {"event": "raised", "type": "ValueError", "message": "x"}, report=STARTED), "runtime_error"),
        (python(SCRIPT, {"event": "raised", "type": "MemoryError", "message": ""}, report=STARTED), "memory"),
        (python(SCRIPT, {"event": "raised", "type": "SystemExit", "message": ""}, report=STARTED), "fail"),
        (python(SCRIPT, {"event": "protocol", "message": "x"}, report=STARTED), "fail"),
        (python(SCRIPT, {"event": "error", "message": "NameError"}, report=STARTED), "runtime_error"),
        # the program ended during the test
        (python(SCRIPT, {"event": "program_gone"}, status=exited(0), report=STARTED), "fail"),
        (python(SCRIPT, {"event": "program_gone"}, status=exited(3), report=STARTED), "runtime_error"),
        (python(SCRIPT, {"event": "program_gone"}, status=killed(signal.SIGXCPU), report=STARTED), "timeout"),
        (python(SCRIPT, {"event": "program_gone"}, status=exited(86), report=STARTED), "memory"),
        (python(SCRIPT, {"event": "program_gone"}, status=exited(0),
                report=report(event="compile_error", message="SyntaxError")), "compile_error"),
        # a forged completion on the program's own report pipe means nothing for a script test
        (python(SCRIPT, {"event": "program_gone"}, status=exited(0), report=report(event="completed")), "fail"),
        (python(SCRIPT, {"event": "assertion"}, report=report(event="completed")), "fail"),
        # a judge killed by the program
        (python(SCRIPT, None, status=exited(0), report=STARTED, judge_status=killed(9)), "runtime_error"),
        # time: CPU over the limit even when the test completed, or stopped by the watcher
        (python(SCRIPT, {"event": "completed"}, report=STARTED, cpu_s=5.2), "timeout"),
        (python(SCRIPT, None, report=STARTED, timed_out="time", judge_status=killed(9), judge_killed=True), "timeout"),
        (python(IO, None, report=STARTED, timed_out="cpu", status=killed(9)), "timeout"),
        # call: the value is compared here, tuples as lists
        (python(CALL, status=exited(0), report=report(event="returned", value={"$t": [1, 2]})), "pass"),
        (python(CALL, status=exited(0), report=report(event="returned", value=[1, 3])), "fail"),
        # an int expected value is exact, even for a float answer
        (python({**CALL, "expected": 1000000006}, status=exited(0), report=report(event="returned", value=1000000005.0)),
         "fail"),
        (python({**CALL, "expected": 3}, status=exited(0), report=report(event="returned", value=3.0)), "pass"),
        (python({**CALL, "expected": 0.3}, status=exited(0), report=report(event="returned", value=0.1 + 0.2)), "pass"),
        (python(CALL, status=exited(0), report=report(event="returned", value={"$s": [1, 2]})), "fail"),
        (python(CALL, status=exited(0), report=report(event="returned", value={"$x": 1})), "fail"),
        (python(CALL, status=exited(0), report=report(event="returned", value=[1, 2]) + b'{"event":"x"}\n'), "fail"),
        # io: exit status 0 and the output
        (python(IO, status=exited(0), report=report(event="completed"), stdout=b"3\n"), "pass"),
        (python(IO, status=exited(0), report=STARTED, stdout=b"3\n"), "pass"),
        (python(IO, status=exited(0), report=report(event="completed"), stdout=b"4\n"), "fail"),
        (python(IO, status=exited(1), report=report(event="runtime_error", message="x"), stdout=b"3\n"), "runtime_error"),
        (python(IO, status=killed(signal.SIGSEGV), report=STARTED, stdout=b"3\n"), "runtime_error"),
        (python(IO, status=killed(signal.SIGXFSZ), report=STARTED), "runtime_error"),
        # the harness's own exit code after the program started is the program's
        (python(IO, status=exited(87), report=STARTED), "runtime_error"),
    ],
)
def test_decision_table(outcome, verdict):
    assert decide(outcome)[0] == verdict


def test_a_process_that_never_started_the_program_is_the_harness_failure():
    for status in (exited(87), exited(0), killed(9)):
        with pytest.raises(HarnessFailure):
            decide(python(IO, status=status, report=b""))
    # A judge that failed by itself (not killed, no report) is the harness's too.
    with pytest.raises(HarnessFailure):
        decide(python(SCRIPT, None, status=exited(0), report=STARTED, judge_status=exited(87)))


def test_native_reports_need_the_nonce():
    test = {"kind": "script", "code": ""}
    good = Outcome(test, status=exited(0), nonce="abc", report=b'{"nonce":"abc", "event": "completed"}\n')
    forged = Outcome(test, status=exited(0), nonce="abc", report=b'{"nonce":"xyz", "event": "completed"}\n')
    assert decide(good)[0] == "pass"
    assert decide(forged) == ("fail", "forged report on the harness channel")


@pytest.mark.parametrize(
    "value",
    [
        None, True, 0, -7, 1 << 70, -(10 ** 5000), 2.5, -0.0, math.inf, "tëxt\udcff", b"\x00\xff", bytearray(b"ab"),
        (1, (2, [3])), [], (), {1, 2}, frozenset({"a"}), set(), {(1, 2): "tuple key", 3: None, "k": [1]},
        1 + 2j, collections.Counter("aab"), collections.OrderedDict(a=1), collections.defaultdict(list, a=[1]),
        collections.deque([1, 2], maxlen=3), fractions.Fraction(1, 3), decimal.Decimal("1.10"), int, ValueError,
    ],
    ids=lambda v: type(v).__name__,
)
def test_codec_round_trips_types(value):
    back = codec.decode(codec.encode(value))
    assert type(back) is type(value) and back == value
    if isinstance(value, collections.defaultdict):
        assert back.default_factory is list


def test_codec_nan_and_subclasses():
    assert math.isnan(codec.decode(codec.encode(math.nan)))
    point = collections.namedtuple("Point", "x y")(1, 2)
    assert codec.decode(codec.encode(point)) == (1, 2)

    class Rigged(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    with pytest.raises(codec.CodecError):
        codec.encode(Rigged(3))
    table = codec.HandleTable()
    tree = codec.to_tree([Rigged(3), object()], table)
    assert [t["$h"] for t in tree] == [1, 2]


@pytest.mark.parametrize(
    "text",
    ['{"$x": 1}', '{"a": 1}', '{"$s": [[1]]}', '{"$d": [[1]]}', '{"$c": ["1", 2]}', '{"$h": 1, "t": "X"}',
     '{"$q": "__import__"}', '{"$q": "open"}', '{"$q": "eval"}', '{"$i": 5}', "[" * 100000, "not json",
     '{"$k": ["Fraction", 1, 0]}', '{"$k": ["Popen", []]}'],
)
def test_codec_refuses_malformed_input(text):
    with pytest.raises(codec.CodecError):
        codec.decode(text)


def test_codec_refuses_too_large_values():
    with pytest.raises(codec.CodecError):
        codec.encode(list(range(codec.MAX_ITEMS + 1)))
    deep: list = []
    for _ in range(codec.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(codec.CodecError):
        codec.encode(deep)
