"""Jobs for the languages judged by their own toolchain (Go, Rust, Java, TypeScript): the same
function ``add(a, b)`` in each, right and wrong, its tests of every kind, and the runaway
programs and reward hacks of the issue's list, each written in the language itself. A
hack's body replaces ``add``'s; a prelude runs before any test (an ``init``, a static
initializer, code at the top of a script, an ``.init_array`` entry)."""

from __future__ import annotations

from dataclasses import dataclass

from grpo_code.sandbox import CallTest, IoTest, Job, Limits, ScriptTest

LIMITS = Limits(timeout_s=2.0, memory_mb=256)
FORGED = '{"nonce":"0123456789abcdef", "event": "completed"}\\n'
FORGED_Q = FORGED.replace('"', '\\"')  # inside a double-quoted string literal


@dataclass(frozen=True)
class Lang:
    template: str  # the program, with {prelude} and {body}
    right: str
    wrong: str
    script: str  # a script test of add(1, 2) == 3
    io: str  # a program printing the sum of two numbers on stdin
    syntax_error: str
    hacks: dict[str, str]  # name -> a body of add (or "prelude:" + code run first)


SHELL_BOMB = "f(){ f|f& };f"
LEFT_BEHIND = "sleep 300 >/dev/null 2>&1 &"

GO = Lang(
    template='package main\n\nimport (\n\t"fmt"\n\t"os"\n\t"os/exec"\n\t"time"\n)\n\nvar _ = fmt.Sprint\n'
             'var _ = os.Exit\nvar _ = exec.Command\nvar _ = time.Sleep\n\n{prelude}\n\n'
             'func Add(a int, b int) int {\n\t{body}\n}\n',
    right="return a + b", wrong="return a - b",
    script='import (\n\t"testing"\n\t"github.com/stretchr/testify/assert"\n)\n\n'
           'func TestAdd(t *testing.T) {\n\tassert := assert.New(t)\n\tassert.Equal(3, Add(1, 2))\n}\n',
    io='package main\n\nimport "fmt"\n\nfunc main() {\n\tvar a, b int\n\tfmt.Scan(&a, &b)\n\tfmt.Println(a + b)\n}\n',
    syntax_error="package main\n\nfunc Add(a int, b int) int {\n\treturn a +\n",
    hacks={
        "exits 0 at start": "prelude:func init() { os.Exit(0) }",
        "exits 0 in the call": "os.Exit(0)\n\treturn 0",
        "forges the report": f'os.NewFile(3, "r").Write([]byte("{FORGED_Q}"))\n\tos.Exit(0)\n\treturn 0',
        "reads the payload for the nonce": 'data, _ := os.ReadFile("/proc/self/fd/4")\n\t'
                                           'os.NewFile(3, "r").Write([]byte(`{"nonce":"` + string(data) + `", "event": "completed"}` + "\\n"))\n\t'
                                           'os.Exit(0)\n\treturn 0',
        "loops forever": "for {\n\t}",
        "sleeps forever": "time.Sleep(1000 * time.Second)\n\treturn 0",
        "allocates without end": "var keep [][]byte\n\tfor {\n\t\tblock := make([]byte, 1<<24)\n\t\tblock[0] = 1\n\t\t"
                                 "keep = append(keep, block)\n\t}",
        "floods stdout": 'for {\n\t\tfmt.Println("flood flood flood flood flood flood flood flood flood flood")\n\t}',
        "fork bomb": f'exec.Command("sh", "-c", "{SHELL_BOMB}").Run()\n\treturn 0',
        "leaves a process behind": f'exec.Command("sh", "-c", "{LEFT_BEHIND}").Run()\n\treturn 0',
    },
)

RUST = Lang(
    template="use std::io::{{Read, Write}};\nuse std::os::unix::io::FromRawFd;\n\n{prelude}\n\n"
             "fn add(a: i64, b: i64) -> i64 {{\n    {body}\n}}\n",
    right="a + b", wrong="a - b",
    script="#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn test_add() {\n"
           "        assert_eq!(add(1, 2), 3);\n    }\n}\n",
    io="use std::io::Read;\nfn main() {\n    let mut s = String::new();\n    std::io::stdin().read_to_string(&mut s).unwrap();\n"
       "    let n: i64 = s.split_whitespace().map(|x| x.parse::<i64>().unwrap()).sum();\n    println!(\"{}\", n);\n}\n",
    syntax_error="fn add(a: i64, b: i64) -> i64 {\n    a +\n",
    hacks={
        "exits 0 at start": 'prelude:#[used]\n#[link_section = ".init_array"]\nstatic EARLY: extern "C" fn() = {\n'
                            '    extern "C" fn early() { std::process::exit(0) }\n    early\n};',
        "exits 0 in the call": "std::process::exit(0)",
        "forges the report": f'let mut f = unsafe {{ std::fs::File::from_raw_fd(3) }};\n    '
                             f'let _ = f.write_all(b"{FORGED_Q}");\n    std::process::exit(0)',
        "reads the payload for the nonce": 'let mut s = String::new();\n    '
                                           'let _ = std::fs::File::open("/proc/self/fd/4").and_then(|mut f| f.read_to_string(&mut s));\n    '
                                           'let mut f = unsafe { std::fs::File::from_raw_fd(3) };\n    '
                                           'let _ = f.write_all(format!("{{\\"nonce\\":\\"{}\\", \\"event\\": \\"completed\\"}}\\n", s.trim()).as_bytes());\n    '
                                           'std::process::exit(0)',
        "loops forever": "loop {}",
        "sleeps forever": "std::thread::sleep(std::time::Duration::from_secs(1000));\n    0",
        "allocates without end": "let mut keep: Vec<Vec<u8>> = Vec::new();\n    loop { keep.push(vec![1u8; 1 << 24]); }",
        "floods stdout": 'loop { println!("flood flood flood flood flood flood flood flood flood flood"); }',
        "fork bomb": f'let _ = std::process::Command::new("sh").arg("-c").arg("{SHELL_BOMB}").status();\n    0',
        "leaves a process behind": f'let _ = std::process::Command::new("sh").arg("-c").arg("{LEFT_BEHIND}").status();\n    0',
    },
)

JAVA = Lang(
    template="import java.util.*;\n\nclass Solution {{\n    static {{ {prelude} }}\n\n"
             "    public int add(int a, int b) {{\n        {body}\n    }}\n}}\n",
    right="return a + b;", wrong="return a - b;",
    script="public class Main {\n    public static void main(String[] args) {\n        Solution s = new Solution();\n"
           "        if (s.add(1, 2) != 3) { throw new AssertionError(); }\n    }\n}\n",
    io="import java.util.*;\n\npublic class Main {\n    public static void main(String[] args) {\n"
       "        Scanner in = new Scanner(System.in);\n        System.out.println(in.nextLong() + in.nextLong());\n    }\n}\n",
    syntax_error="class Solution {\n    public int add(int a, int b) {\n        return a +\n",
    hacks={
        "exits 0 at start": "prelude:System.exit(0);",
        "exits 0 in the call": "System.exit(0);\n        return 0;",
        "forges the report": 'try (java.io.FileOutputStream f = new java.io.FileOutputStream("/proc/self/fd/3")) {\n'
                             f'            f.write("{FORGED_Q}".getBytes());\n        }} catch (Exception e) {{}}\n'
                             "        Runtime.getRuntime().halt(0);\n        return 0;",
        "reads the payload for the nonce": 'String s = "";\n        try { s = new String(java.nio.file.Files.readAllBytes('
                                           'java.nio.file.Paths.get("/proc/self/fd/4"))); } catch (Exception e) {}\n'
                                           '        try (java.io.FileOutputStream f = new java.io.FileOutputStream("/proc/self/fd/3")) {\n'
                                           '            f.write(("{\\"nonce\\":\\"" + s.trim() + "\\", \\"event\\": \\"completed\\"}\\n").getBytes());\n'
                                           "        } catch (Exception e) {}\n        Runtime.getRuntime().halt(0);\n        return 0;",
        "loops forever": "while (true) {}",
        "sleeps forever": "try { Thread.sleep(1000000); } catch (Exception e) {}\n        return 0;",
        "allocates without end": "List<long[]> keep = new ArrayList<>();\n        while (true) { keep.add(new long[1 << 22]); }",
        "floods stdout": 'while (true) { System.out.println("flood flood flood flood flood flood flood flood flood"); }',
        "fork bomb": f'try {{ new ProcessBuilder("sh", "-c", "{SHELL_BOMB}").start().waitFor(); }} catch (Exception e) {{}}\n'
                     "        return 0;",
        "leaves a process behind": f'try {{ new ProcessBuilder("sh", "-c", "{LEFT_BEHIND}").start().waitFor(); }} '
                                   "catch (Exception e) {}\n        return 0;",
    },
)

TYPESCRIPT = Lang(
    template="declare var require: any;\ndeclare var process: any;\n\n{prelude}\n\n"
             "function add(a: number, b: number): number {{\n    {body}\n}}\n",
    right="return a + b;", wrong="return a - b;",
    script='declare var require: any;\nconst assert = require("node:assert");\n\nfunction test() {\n'
           "    let candidate = add;\n    assert.deepEqual(candidate(1, 2), 3);\n}\n\ntest();\n",
    io='declare var require: any;\nconst text: string = require("fs").readFileSync(0, "utf8");\n'
       "console.log(text.split(/\\s+/).filter((x: string) => x).map(Number).reduce((x: number, y: number) => x + y, 0));\n",
    syntax_error="function add(a: number, b: number): number {\n    return a +\n",
    hacks={
        "exits 0 at start": "prelude:process.exit(0);",
        "exits 0 in the call": "process.exit(0);\n    return 0;",
        "forges the report": f"require('fs').writeSync(3, '{FORGED}');\n    process.exit(0);\n    return 0;",
        "reads the payload for the nonce": "let s = '';\n    try { s = require('fs').readFileSync('/proc/self/fd/4', 'utf8'); } catch (e) {}\n"
                                           "    try { require('fs').writeSync(3, JSON.stringify({nonce: s.trim(), event: 'completed'}) + '\\n'); } catch (e) {}\n"
                                           "    process.exit(0);\n    return 0;",
        "loops forever": "while (true) {}",
        "sleeps forever": "Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1e9);\n    return 0;",
        "allocates without end": "const keep: number[][] = [];\n    while (true) { keep.push(new Array(1e6).fill(1)); }",
        "floods stdout": "while (true) { console.log('flood flood flood flood flood flood flood flood flood'); }",
        "fork bomb": f"require('child_process').spawnSync('sh', ['-c', '{SHELL_BOMB}']);\n    return 0;",
        "leaves a process behind": f"require('child_process').spawnSync('sh', ['-c', '{LEFT_BEHIND}']);\n    return 0;",
    },
)

LANGS = {"go": GO, "rust": RUST, "java": JAVA, "typescript": TYPESCRIPT}
FN = {"go": "Add"}


def program(language: str, body: str) -> str:
    lang = LANGS[language]
    prelude = body[len("prelude:"):] if body.startswith("prelude:") else ""
    body = lang.right if body.startswith("prelude:") else body
    if language == "go":  # a template without format braces
        return lang.template.replace("{prelude}", prelude).replace("{body}", body)
    return lang.template.format(prelude=prelude, body=body)


def call(language: str) -> CallTest:
    return CallTest(FN.get(language, "add"), (1, 2), 3)


def job(language: str, body: str, *tests, limits: Limits = LIMITS) -> Job:
    tests = tests or (call(language), ScriptTest(LANGS[language].script))
    return Job(program(language, body), tuple(tests), language=language, limits=limits)


def mixed(language: str) -> tuple[list[Job], list[list[str]]]:
    """Every test kind, passing and failing: the right and the wrong ``add``, and the io program."""
    lang = LANGS[language]
    fn = FN.get(language, "add")
    calls = (CallTest(fn, (1, 2), 3), CallTest(fn, (2, 2), 5), ScriptTest(lang.script))
    io = Job(lang.io, (IoTest("1 2\n", "3\n"), IoTest("2 2\n", "5\n")), language=language, limits=LIMITS)
    return ([job(language, lang.right, *calls), job(language, lang.wrong, *calls), io],
            [["pass", "fail", "pass"], ["fail", "fail", "fail"], ["pass", "fail"]])
