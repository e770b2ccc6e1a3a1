"""HumanEval-X / MultiPL-E asserts to call tests (grpo_code/tasks/native_asserts.py), from a
table: each input test code gives exactly these call tests, or stays a script (None)."""

from __future__ import annotations

import pytest

from grpo_code.tasks.literals import tokenize
from grpo_code.tasks.native_asserts import call_tests, return_type

JS_X = """const testHasCloseElements = () => {
  console.assert(hasCloseElements([1.0, 2.0, 3.9], 0.3) === true)
  console.assert(
    hasCloseElements([], 0.05) === false
  )
}

testHasCloseElements()
"""
JS_MULTIPL_E = """const assert = require('node:assert');


function test() {
  let candidate = count_upper;
  assert.deepEqual(candidate("aBC"),2);
  assert.strictEqual(candidate(''), 0);
  assert.equal(candidate({'a b': [-1, null], c: "x\\"y"}), 1);
}

test();
"""
JS_FORMS = """const t = () => {
  // a comment
  console.assert(JSON.stringify(f('a\\'b', 1e3)) === JSON.stringify(['x', -2.5]));
  console.assert(Math.abs(f(3.5) - 2.0 / 4) < 1e-6);
  console.assert(f(true, null) === null);
}
t()
"""
CPP_X = """#undef NDEBUG
#include<assert.h>
bool issame(vector<float> a,vector<float>b){
    if (a.size()!=b.size()) return false;
    for (int i=0;i<a.size();i++)
    {
    if (abs(a[i]-b[i])>1e-4) return false;
    }
    return true;
}
int main(){
    vector<float> a={1.0, 2.0, 3.9};
    assert (issame(f(a, 0.3f) , {0.0, 1.0}));
    assert (issame(f({}, 2) , {}));
    assert (abs(f({1.0, 2.0, 3.0}, 1) - 2.0/3.0) < 1e-4);
}
"""
CPP_MULTIPL_E = """int main() {
    auto candidate = f;
    assert(candidate((std::vector<std::tuple<long, long>>({(std::tuple<long, long>)std::make_tuple(0, 0)})), ("a\\n" "b")) == (std::map<std::string,long>({{"a", 1}, {"b", 2}})));
    assert(candidate((std::vector<std::tuple<long, long>>()), (std::string("z"))) == (std::map<std::string,long>()));
}
"""
CPP_SCALARS = """int main(){
    assert (g(3L, 'c', -07, 0x10, 2.5f, (float)1, 7/2) == 1);
    assert (g(1, 'a', 0, 0, 0, 0, 1));
    assert (not g(1, 'a', 0, 0, 0, 0, 1));
    assert (!(g(1, 'a', 0, 0, 0, 0, 1)));
    return 0;
}
"""

# (language, test code, entry point, prompt, expected call tests or None)
TABLE = [
    ("javascript", JS_X, "hasCloseElements", "", [
        {"fn": "hasCloseElements", "args": [[1.0, 2.0, 3.9], 0.3], "expected": True},
        {"fn": "hasCloseElements", "args": [[], 0.05], "expected": False}]),
    ("javascript", JS_MULTIPL_E, "count_upper", "", [
        {"fn": "count_upper", "args": ["aBC"], "expected": 2},
        {"fn": "count_upper", "args": [""], "expected": 0},
        {"fn": "count_upper", "args": [{"a b": [-1, None], "c": 'x"y'}], "expected": 1}]),
    ("javascript", JS_FORMS, "f", "", [
        {"fn": "f", "args": ["a'b", 1000.0], "expected": ["x", -2.5]},
        {"fn": "f", "args": [3.5], "expected": 0.5, "abs_tol": 1e-6},
        {"fn": "f", "args": [True, None], "expected": None}]),
    ("cpp", CPP_X, "f", "#include<vector>\nvector<float> f(vector<float> v, float t){\n", [
        {"fn": "f", "args": [[1.0, 2.0, 3.9], 0.3], "expected": [0.0, 1.0], "abs_tol": 1e-4},
        {"fn": "f", "args": [[], 2], "expected": [], "abs_tol": 1e-4},
        {"fn": "f", "args": [[1.0, 2.0, 3.0], 1], "expected": 2.0 / 3.0, "abs_tol": 1e-4}]),
    ("cpp", CPP_MULTIPL_E, "f", "std::map<std::string,long> f(std::vector<std::tuple<long, long>> v, "
                                "std::string s) {\n", [
        {"fn": "f", "args": [[[0, 0]], "a\nb"], "expected": {"a": 1, "b": 2}},
        {"fn": "f", "args": [[], "z"], "expected": {}}]),
    # bool return: 1 reads as true, a bare call as true, a negated one as false; C++ int
    # division, octal, hex, char, casts
    ("cpp", CPP_SCALARS, "g", "bool g(long a, char c, int o, int h, float x, float y, int q) {", [
        {"fn": "g", "args": [3, "c", -7, 16, 2.5, 1.0, 3], "expected": True},
        {"fn": "g", "args": [1, "a", 0, 0, 0, 0, 1], "expected": True},
        {"fn": "g", "args": [1, "a", 0, 0, 0, 0, 1], "expected": False},
        {"fn": "g", "args": [1, "a", 0, 0, 0, 0, 1], "expected": False}]),
    # a map<int, ...> return: non-string keys travel as {"$d": ...}
    ("cpp", "int main(){ assert (issame(h(2), {{1, 'a'}, {2, 'b'}})); }\nbool issame(map<int,char> a, map<int,char> b)"
            "{ return a == b; }", "h", "map<int,char> h(int n){",
     None),  # a helper defined after main is not declared there (C++ would not compile it)
    ("cpp", "bool issame(map<int,char> a, map<int,char> b){ return a == b; }\nint main(){ assert (issame(h(2), "
            "{{1, 'a'}, {2, 'b'}})); }", "h", "map<int,char> h(int n){",
     [{"fn": "h", "args": [2], "expected": {"$d": [[1, "a"], [2, "b"]]}}]),
    # HumanEval-X's other spellings: abs(f(x) + 1) < tol means -1; JavaScript's string
    # concatenation, ** and integer literals past 2**53 (a double, as JavaScript reads them)
    ("cpp", "int main(){ assert (abs(f(1, 2, 10) +1)<0.01); }", "f", "float f(float a, float b, float c){",
     [{"fn": "f", "args": [1, 2, 10], "expected": -1, "abs_tol": 0.01}]),
    ("javascript", "console.assert(f('ab' + 'c', 1 ** 0) === -9999999999999999)\n", "f", "",
     [{"fn": "f", "args": ["abc", 1], "expected": -1e16}]),
    # --- stays a script: anything of another shape
    ("cpp", "int main(){ for (int i=0;i<3;i++) { assert (f(i)==i); } }", "f", "int f(int x){", None),
    # a bool helper of two values that is not named as an equality is not one
    ("cpp", "bool bigger(int a, int b){ return a > b; }\nint main(){ assert (bigger(f(1), 3)); }", "f",
     "int f(int x){", None),
    ("cpp", "int main(){ assert (f(1)); }", "f", "int f(int x){", None),  # truthiness of an int
    ("cpp", "int main(){ int x = f(1); assert (x == 2); }", "f", "int f(int x){", None),
    ("cpp", "int main(){ assert (f(1) == 2 && f(2) == 3); }", "f", "int f(int x){", None),
    ("cpp", "#define X 3\nint main(){ assert (f(1) == X); }", "f", "int f(int x){", None),
    ("cpp", "int main(){ assert (f(1) != 2); }", "f", "int f(int x){", None),
    ("cpp", "int main(){ assert (abs(poly(xs, f(xs))) < 1e-3); }", "f", "double f(vector<double> xs){", None),
    ("cpp", "int g(int y){ return y; }\nint main(){ assert (f(g(1)) == 2); }", "f", "int f(int x){", None),
    ("javascript", "console.assert(f(1) === 2)\nconsole.log('done')\n", "f", "", None),
    ("javascript", "console.assert(f(1))\n", "f", "", None),
    ("javascript", "console.assert(f(3, 4, 5) == 6.00)\n", "f", "", None),  # "6.00" == 6 in JavaScript
    ("javascript", "console.assert(f(1) == 'a')\nconsole.assert(f(2) === null)\n", "f", "",
     [{"fn": "f", "args": [1], "expected": "a"}, {"fn": "f", "args": [2], "expected": None}]),
    # a returned undefined is == null in JavaScript, and undefined is no expected value
    ("javascript", "console.assert(f(2) == null)\n", "f", "", None),
    ("javascript", "console.assert(f(2) === undefined)\n", "f", "", None),
    ("javascript", "const t = () => {\n console.assert(f(1) === 2)\n}\n", "f", "", None),  # never called
    ("javascript", "for (let i = 0; i < 3; i++) console.assert(f(i) === i)\n", "f", "", None),
    ("javascript", "console.assert(f(`a${x}`) === 1)\n", "f", "", None),
    ("javascript", "console.assert(g(1) === 2)\n", "f", "", None),  # not the function under test
    ("javascript", "", "f", "", None),
]


@pytest.mark.parametrize("language, code, entry, prompt, expected", TABLE)
def test_conversion_table(language, code, entry, prompt, expected):
    got = call_tests(language, code, entry, prompt)
    if expected is None:
        assert got is None
        return
    assert got == [{"kind": "call", **e} for e in expected]


def test_return_type_is_the_last_declaration_in_the_prompt():
    prompt = "/* For example: f(1) */\n#include<vector>\nusing namespace std;\nstd::vector<std::tuple<long, long>> f(int x){\n"
    assert return_type(prompt, "f") == "std::vector<std::tuple<long, long>>"
    assert return_type("long count_upper(std::string s) {\n", "count_upper") == "long"
    assert return_type("nothing here", "f") is None


def test_tokens_keep_cpp_string_concatenation_and_js_quotes():
    assert tokenize('"a" "b"', "cpp")[0] == ("str", "ab")
    assert tokenize("'ab'", "javascript")[0] == ("str", "ab")
    assert tokenize("1.5f 10LL 0x1F", "cpp")[:3] == [("num", 1.5), ("num", 10), ("num", 31)]
