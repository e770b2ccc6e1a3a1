"""C++ ``call`` tests (harness/cpp_call.hpp): arguments decoded into the function's own
types, the returned value encoded and compared by the executor, on the local backend
(g++ on the host) and on docker."""

from __future__ import annotations

import shutil

import pytest

from conftest import need, need_image
from grpo_code.config import SandboxConfig
from grpo_code.sandbox import CallTest, Job, Limits, Sandbox

PROGRAM = r"""#include <bits/stdc++.h>
using namespace std;
vector<float> rescale(vector<float> v, float lo) { for (auto &x : v) x = x / 10 + lo; return v; }
map<char, int> hist(const string &s) { map<char, int> m; for (char c : s) m[c]++; return m; }
map<int, string> invert(const map<string, int> &m) { map<int, string> r; for (auto &kv : m) r[kv.second] = kv.first; return r; }
tuple<long, long> min_max(vector<long> v) { return {*min_element(v.begin(), v.end()), *max_element(v.begin(), v.end())}; }
float third() { return 3.1f; }
double tenth() { return 0.1; }
bool max_element(int x) { return x > 0; }
optional<string> first(vector<string> v) { if (v.empty()) return nullopt; return v[0]; }
char initial(string s) { return s[0]; }
void bump(int &x) { x++; }
string raw() { return string("a\xff\"\n"); }
map<string, int> bytes_keys() { return {{string("\xff"), 1}}; }
pair<int, vector<pair<string, bool>>> nested(set<int> s) { return {(int)s.size(), {{"x", true}}}; }
unsigned long long big() { return 18446744073709551615ull; }
int main() { return 3; }
"""

# (function, arguments, expected, verdict)
CASES = [
    ("rescale", [[1, 2.5], 0.5], [0.6, 0.75], "pass"),
    ("hist", ["abca"], {"a": 2, "b": 1, "c": 1}, "pass"),
    ("invert", [{"x": 1, "y": 2}], {"$d": [[1, "x"], [2, "y"]]}, "pass"),
    ("min_max", [[3, -9007199254740993, 7]], [-9007199254740993, 7], "pass"),
    ("third", [], 3.1, "pass"),  # a float in its shortest round-trip form
    ("tenth", [], 0.1, "pass"),
    ("max_element", [2], True, "pass"),  # the program's own, not std::max_element
    ("first", [[]], None, "pass"),
    ("first", [["q", "r"]], "q", "pass"),
    ("initial", ["zy"], "z", "pass"),
    ("bump", [1], None, "pass"),
    # a string that is not UTF-8 is its bytes: it equals those bytes, never the text of
    # the code points its bytes would read as
    ("raw", [], {"$b": "61ff220a"}, "pass"),
    ("raw", [], "a\u00ff\"\n", "fail"),
    ("bytes_keys", [], {"$d": [[{"$b": "ff"}, 1]]}, "pass"),
    ("nested", [{"$s": [3, 1]}], [2, [["x", True]]], "pass"),
    ("big", [], 18446744073709551615, "pass"),
    ("hist", ["abca"], {"a": 3}, "fail"),
    ("third", [], 3.2, "fail"),
    ("hist", [5], {}, "runtime_error"),  # an argument of another type
    ("hist", [], {}, "runtime_error"),  # a test with another number of arguments
]


def _job() -> Job:
    tests = tuple(CallTest(fn, tuple(args), expected) for fn, args, expected, _ in CASES)
    return Job(PROGRAM, tests, "cpp", limits=Limits(timeout_s=5.0, memory_mb=256))


def _check(sandbox: Sandbox) -> None:
    [result] = sandbox.run([_job()])
    got = [(fn, t.verdict.value) for (fn, *_), t in zip(CASES, result.tests)]
    assert got == [(fn, verdict) for fn, _, _, verdict in CASES], result
    assert all(t.attested for t in result.tests)
    failed = result.tests[CASES.index(("third", [], 3.2, "fail"))]
    assert "returned 3.1" in failed.message


def test_cpp_call_values_on_the_local_backend():
    need(shutil.which("g++") is not None, "g++ is not installed on this machine", required_in_ci=False)
    with Sandbox(SandboxConfig(backend="local", workers=1, compile_timeout_s=30.0), quiet=True) as sb:
        _check(sb)


@pytest.mark.docker
def test_cpp_call_values_on_docker(docker_ready):
    need_image("cpp")
    with Sandbox(SandboxConfig(backend="docker", workers=1, compile_timeout_s=30.0)) as sb:
        _check(sb)
