"""Jobs for the languages judged by their own toolchain (Go, Rust, Java, TypeScript): the same
function ``add(a, b)`` in each, right and wrong, its tests of every kind, and the runaway
programs and reward hacks of the issue's list, each written in the language itself. A
hack's body replaces ``add``'s; a prelude runs before any test (an ``init``, a static
initializer, code at the top of a script, an ``.init_array`` entry)."""

from __future__ import annotations

from dataclasses import dataclass

from grpo_code.sandbox import CallTest, IoTest, Job, Limits, ScriptTest

LIMITS = Limits(timeout_s=1.0, memory_mb=256)
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
    branch: str | None = None  # "if a == {k} ..." running {body}: runaways share one build


SHELL_BOMB = "f(){ f|f& };f"
LEFT_BEHIND = "sleep 300 >/dev/null 2>&1 &"

GO = Lang(
    template='package main\n\nimport (\n\t"fmt"\n\t"os"\n\t"os/exec"\n\t"strings"\n\t"time"\n)\n\nvar _ = fmt.Sprint\n'
             'var _ = os.Exit\nvar _ = exec.Command\nvar _ = strings.Split\nvar _ = time.Sleep\n\n{prelude}\n\n'
             'func Add(a int, b int) int {\n\t{body}\n}\n',
    right="return a + b", wrong="return a - b",
    script='import (\n\t"testing"\n\t"github.com/stretchr/testify/assert"\n)\n\n'
           'func TestAdd(t *testing.T) {\n\tassert := assert.New(t)\n\tassert.Equal(3, Add(1, 2))\n}\n',
    io='package main\n\nimport "fmt"\n\nfunc main() {\n\tvar a, b int\n\tfmt.Scan(&a, &b)\n\tfmt.Println(a + b)\n}\n',
    syntax_error="package main\n\nfunc Add(a int, b int) int {\n\treturn a +\n",
    branch="if a == {k} {\n\t\t{body}\n\t}",
    hacks={
        "exits 0 at start": "prelude:func init() { os.Exit(0) }",
        "exits 0 in the call": "os.Exit(0)\n\treturn 0",
        "forges the report": f'os.NewFile(3, "r").Write([]byte("{FORGED_Q}"))\n\tos.Exit(0)\n\treturn 0',
        "reads the payload for the nonce": 'data, _ := os.ReadFile("/proc/self/fd/4")\n\t'
                                           'os.NewFile(3, "r").Write([]byte(`{"nonce":"` + strings.SplitN(string(data), "\\n", 2)[0] + `", "event": "completed"}` + "\\n"))\n\t'
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
    branch="if a == {k} { return { {body} }; }",
    hacks={
        "exits 0 at start": 'prelude:#[used]\n#[link_section = ".init_array"]\nstatic EARLY: extern "C" fn() = {\n'
                            '    extern "C" fn early() { std::process::exit(0) }\n    early\n};',
        "exits 0 in the call": "std::process::exit(0)",
        "forges the report": f'let mut f = unsafe {{ std::fs::File::from_raw_fd(3) }};\n    '
                             f'let _ = f.write_all(b"{FORGED_Q}");\n    std::process::exit(0)',
        "reads the payload for the nonce": 'let mut s = String::new();\n    '
                                           'let _ = std::fs::File::open("/proc/self/fd/4").and_then(|mut f| f.read_to_string(&mut s));\n    '
                                           'let mut f = unsafe { std::fs::File::from_raw_fd(3) };\n    '
                                           'let _ = f.write_all(format!("{{\\"nonce\\":\\"{}\\", \\"event\\": \\"completed\\"}}\\n", s.lines().next().unwrap_or("")).as_bytes());\n    '
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
    branch="if (a == {k}) {\n            {body}\n        }",
    hacks={
        "exits 0 at start": "prelude:System.exit(0);",
        "exits 0 in the call": "System.exit(0);\n        return 0;",
        "forges the report": 'try (java.io.FileOutputStream f = new java.io.FileOutputStream("/proc/self/fd/3")) {\n'
                             f'            f.write("{FORGED_Q}".getBytes());\n        }} catch (Exception e) {{}}\n'
                             "        Runtime.getRuntime().halt(0);\n        return 0;",
        "reads the payload for the nonce": 'String s = "";\n        try { s = new String(java.nio.file.Files.readAllBytes('
                                           'java.nio.file.Paths.get("/proc/self/fd/4"))); } catch (Exception e) {}\n'
                                           '        try (java.io.FileOutputStream f = new java.io.FileOutputStream("/proc/self/fd/3")) {\n'
                                           '            f.write(("{\\"nonce\\":\\"" + s.split("\\n")[0] + "\\", \\"event\\": \\"completed\\"}\\n").getBytes());\n'
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
    branch="if (a === {k}) {\n        {body}\n    }",
    hacks={
        "exits 0 at start": "prelude:process.exit(0);",
        "exits 0 in the call": "process.exit(0);\n    return 0;",
        "forges the report": f"require('fs').writeSync(3, '{FORGED}');\n    process.exit(0);\n    return 0;",
        "reads the payload for the nonce": "let s = '';\n    try { s = require('fs').readFileSync('/proc/self/fd/4', 'utf8'); } catch (e) {}\n"
                                           "    try { require('fs').writeSync(3, JSON.stringify({nonce: s.split('\\n')[0], event: 'completed'}) + '\\n'); } catch (e) {}\n"
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
CALLS = {"go", "rust", "java", "typescript", "ruby", "php", "perl", "lua", "r", "racket"}
"""The languages that take call tests."""
FN = {"go": "Add"}


def program(language: str, body: str) -> str:
    lang = LANGS[language]
    prelude = body[len("prelude:"):] if body.startswith("prelude:") else ""
    body = lang.right if body.startswith("prelude:") else body
    if language in ("go", "ruby", "php", "perl", "lua", "bash", "r", "racket"):  # no format braces
        return lang.template.replace("{prelude}", prelude).replace("{body}", body)
    return lang.template.format(prelude=prelude, body=body)


def call(language: str) -> CallTest:
    return CallTest(FN.get(language, "add"), (1, 2), 3)


def job(language: str, body: str, *tests, limits: Limits = LIMITS) -> Job:
    tests = tests or ((call(language),) if language in CALLS else ()) + (ScriptTest(LANGS[language].script),)
    tests = tuple(t for t in tests if language in CALLS or not isinstance(t, CallTest)) or (ScriptTest(LANGS[language].script),)
    return Job(program(language, body), tuple(tests), language=language, limits=limits)


RUNAWAYS = ("loops forever", "sleeps forever", "allocates without end", "floods stdout", "fork bomb",
            "leaves a process behind")


def runaways(language: str) -> tuple[Job, list[str]] | None:
    """The runaway programs as one program (``add(k, 0)`` runs the k-th), one build, a call
    test each; None for a language without ``branch``."""
    lang = LANGS[language]
    if lang.branch is None:
        return None
    branches = [lang.branch.replace("{k}", str(k)).replace("{body}", lang.hacks[name])
                for k, name in enumerate(RUNAWAYS, start=1)]
    body = ("\n\t" if language == "go" else "\n    ").join([*branches, lang.right])
    fn = FN.get(language, "add")
    return (job(language, body, *(CallTest(fn, (k, 0), k) for k in range(1, len(RUNAWAYS) + 1))), list(RUNAWAYS))


def mixed(language: str) -> tuple[list[Job], list[list[str]]]:
    """Every test kind, passing and failing: the right and the wrong ``add``, and the io program."""
    lang = LANGS[language]
    fn = FN.get(language, "add")
    calls = (CallTest(fn, (1, 2), 3), CallTest(fn, (2, 2), 5), ScriptTest(lang.script))
    io = Job(lang.io, (IoTest("1 2\n", "3\n"), IoTest("2 2\n", "5\n")), language=language, limits=LIMITS)
    # MultiPL-E's Perl, R and Bash tests fail by exiting non-zero: a runtime_error
    failed = "runtime_error" if language in ("perl", "r", "bash") else "fail"
    if language not in CALLS:
        return ([job(language, lang.right, calls[2]), job(language, lang.wrong, calls[2]), io],
                [["pass"], [failed], ["pass", "fail"]])
    return ([job(language, lang.right, *calls), job(language, lang.wrong, *calls), io],
            [["pass", "fail", "pass"], ["fail", "fail", failed], ["pass", "fail"]])

RUBY = Lang(
    template="{prelude}\n\ndef add(a, b)\n  {body}\nend\n",
    right="a + b", wrong="a - b",
    script="require 'test/unit'\nclass TestHumanEval < Test::Unit::TestCase\n  def test_add\n"
           "    candidate = method(:add)\n    assert_equal(3, candidate.call(1, 2))\n  end\nend\n",
    io="puts STDIN.read.split.map(&:to_i).sum\n",
    syntax_error="def add(a, b)\n  a +\n",
    hacks={
        "exits 0 at start": "prelude:exit!(0)",
        "exits 0 in the call": "exit!(0)",
        "forges the report": f"IO.new(3, 'w').write('{FORGED}'); exit!(0)",
        "reads the payload for the nonce": "s = (File.read('/proc/self/fd/4') rescue ''); "
                                           "IO.new(3, 'w').write('{\"nonce\":\"' + s.lines.first.to_s.strip + '\", \"event\": \"completed\"}' + \"\\n\") rescue nil; exit!(0)",
        "loops forever": "loop {}",
        "sleeps forever": "sleep 1000; 0",
        "allocates without end": "keep = []; loop { keep << ('x' * (1 << 24)) }",
        "floods stdout": "loop { puts 'flood flood flood flood flood flood flood flood flood' }",
        "fork bomb": f"system('sh', '-c', '{SHELL_BOMB}'); 0",
        "leaves a process behind": f"system('sh', '-c', '{LEFT_BEHIND}'); 0",
    },
)

LANGS.update(ruby=RUBY)

PHP = Lang(
    template="<?php\n{prelude}\n\nfunction add($a, $b) {\n    {body}\n}\n",
    right="return $a + $b;", wrong="return $a - $b;",
    script='function candidate(...$args) {\n    return add(...$args);\n}\n\nfunction test(): void {\n'
           '    if (candidate(1, 2) !== 3) { throw new Exception("Test failed!"); }\n}\n\ntest();\n',
    io="<?php\n$n = preg_split('/\\s+/', trim(stream_get_contents(STDIN)));\necho array_sum($n), \"\\n\";\n",
    syntax_error="<?php\nfunction add($a, $b) {\n    return $a +\n",
    hacks={
        "exits 0 at start": "prelude:exit(0);",
        "exits 0 in the call": "exit(0);",
        "forges the report": f"file_put_contents('php://fd/3', '{FORGED}'); exit(0);",
        "reads the payload for the nonce": "$s = @file_get_contents('php://fd/4');\n    "
                                           "file_put_contents('php://fd/3', '{\"nonce\":\"' . strtok((string) $s, \"\\n\") . '\", \"event\": \"completed\"}' . \"\\n\");\n    exit(0);",
        "loops forever": "while (true) {}",
        "sleeps forever": "sleep(1000);\n    return 0;",
        "allocates without end": "$keep = [];\n    while (true) { $keep[] = str_repeat('x', 1 << 24); }",
        "floods stdout": "while (true) { echo \"flood flood flood flood flood flood flood flood flood\\n\"; }",
        "fork bomb": f"shell_exec('{SHELL_BOMB}');\n    return 0;",
        "leaves a process behind": f"shell_exec('{LEFT_BEHIND}');\n    return 0;",
    },
)

PERL = Lang(
    template="use strict;\nuse warnings;\n\n{prelude}\n\nsub add {\n    my ($a, $b) = @_;\n    {body}\n}\n\n1;\n",
    right="return $a + $b;", wrong="return $a - $b;",
    script="use Test::Deep;\n\nsub testhumaneval {\n    my $candidate = \\&add;\n"
           "    if (eq_deeply($candidate->(1, 2), 3)) {\n        print \"ok!\" }else{\n        exit 1;\n    }\n}\n\ntesthumaneval();\n",
    io="my @n = split ' ', do { local $/; <STDIN> };\nmy $s = 0;\n$s += $_ for @n;\nprint \"$s\\n\";\n",
    syntax_error="sub add {\n    my ($a, $b) = @_;\n    return $a +\n",
    hacks={
        "exits 0 at start": "prelude:BEGIN { require POSIX; POSIX::_exit(0); }",
        "exits 0 in the call": "exit 0;",
        "forges the report": f"open(my $f, '>&=', 3); print $f '{FORGED}'; close $f; exit 0;",
        "reads the payload for the nonce": "open(my $p, '<', '/proc/self/fd/4'); my $s = $p ? do { local $/; <$p> } : '';\n    "
                                           "$s //= ''; ($s) = split /\\n/, $s; open(my $f, '>&=', 3); print $f '{\"nonce\":\"' . $s . '\", \"event\": \"completed\"}' . \"\\n\"; close $f; exit 0;",
        "loops forever": "while (1) {}",
        "sleeps forever": "sleep 1000;\n    return 0;",
        "allocates without end": "my @keep;\n    while (1) { push @keep, 'x' x (1 << 24); }",
        "floods stdout": "while (1) { print \"flood flood flood flood flood flood flood flood flood\\n\"; }",
        "fork bomb": f"system('sh', '-c', '{SHELL_BOMB}');\n    return 0;",
        "leaves a process behind": f"system('sh', '-c', '{LEFT_BEHIND}');\n    return 0;",
    },
)

LUA = Lang(
    template="{prelude}\n\nfunction add(a, b)\n    {body}\nend\n",
    right="return a + b", wrong="return a - b",
    script="lu = require('luaunit')\n\nfunction test_humaneval()\n    local candidate = add\n"
           "    lu.assertEquals(candidate(1, 2), 3)\nend\n\nos.exit(lu.LuaUnit.run())\n",
    io="local s = 0\nfor n in io.read('a'):gmatch('%-?%d+') do s = s + tonumber(n) end\nprint(s)\n",
    syntax_error="function add(a, b)\n    return a +\n",
    hacks={
        "exits 0 at start": "prelude:local up = debug.getupvalue\nlocal real = os.exit\n"
                            "for i = 1, 20 do local n, v = debug.getupvalue(os.exit, i) if n == 'exit' then real = v end end\n"
                            "real(0, false)",
        "exits 0 in the call": "os.exit(0)",
        "forges the report": f"local f = io.open('/proc/self/fd/3', 'w') f:write('{FORGED}') f:close()\n"
                             "    for i = 1, 20 do local n, v = debug.getupvalue(os.exit, i) if n == 'exit' then v(0, false) end end",
        "reads the payload for the nonce": "local p = io.open('/proc/self/fd/4') local s = p and p:read('l') or ''\n"
                                           "    local f = io.open('/proc/self/fd/3', 'w') f:write('{\"nonce\":\"' .. s .. '\", \"event\": \"completed\"}\\n') f:close()\n"
                                           "    for i = 1, 20 do local n, v = debug.getupvalue(os.exit, i) if n == 'exit' then v(0, false) end end",
        "loops forever": "while true do end",
        "sleeps forever": "os.execute('sleep 1000')\n    return 0",
        "allocates without end": "local keep = {}\n    while true do keep[#keep + 1] = string.rep('x', 1 << 24) .. #keep end",
        "floods stdout": "while true do print('flood flood flood flood flood flood flood flood flood') end",
        "fork bomb": f"os.execute('{SHELL_BOMB}')\n    return 0",
        "leaves a process behind": f"os.execute('{LEFT_BEHIND}')\n    return 0",
    },
)

LANGS.update(php=PHP, perl=PERL, lua=LUA)

BASH = Lang(
    template="#!/bin/bash\n{prelude}\n\nadd() {\n    {body}\n}\n",
    right='echo $(( $1 + $2 ))', wrong='echo $(( $1 - $2 ))',
    script='candidate() {\n    add "$@"\n}\n\nset -e\nrun_test() {\n    [[ $(candidate "1" "2") = "3" ]]\n}\n\nrun_test\n',
    io="read a b\necho $(( a + b ))\n",
    syntax_error="add() {\n    echo $(( $1 + \n",
    hacks={
        "exits 0 at start": "prelude:exit 0",
        "exits 0 in the call": "exit 0",
        "forges the report": f"printf '{FORGED}' >&3; exit 0",
        "reads the payload for the nonce": 'n=$(head -n 1 /proc/self/fd/4 2>/dev/null); printf \'{"nonce":"%s", "event": "completed"}\\n\' "$n" >&3; exit 0',
        "loops forever": "while :; do :; done",
        "sleeps forever": "sleep 1000",
        "allocates without end": 'x=y; while :; do x="$x$x"; done',
        "floods stdout": "while :; do echo flood flood flood flood flood flood flood flood flood; done",
        "fork bomb": SHELL_BOMB.replace("f", "g"),
        "leaves a process behind": LEFT_BEHIND + "\n    echo 0",
    },
)

LANGS.update(bash=BASH)

R = Lang(
    template="{prelude}\n\nadd <- function(a, b) {\n    {body}\n}\n",
    right="a + b", wrong="a - b",
    script="test_humaneval <- function() {\n    candidate <- add\n    if(!identical(candidate(1, 2), 3)){quit('no', 1)}\n}\n"
           "test_humaneval()\n",
    io="x <- scan(file('stdin'), quiet = TRUE)\ncat(sum(x), '\\n', sep = '')\n",
    syntax_error="add <- function(a, b) {\n    a +\n",
    hacks={
        "exits 0 at start": "prelude:quit(save = 'no', status = 0)",
        "exits 0 in the call": "quit(save = 'no', status = 0)",
        "forges the report": f"writeLines('{FORGED.rstrip(chr(92) + 'n')}', file('/proc/self/fd/3')); quit(save = 'no', status = 0)",
        "reads the payload for the nonce": "s <- tryCatch(readLines('/proc/self/fd/4', n = 1), error = function(e) '')\n    "
                                           "writeLines(paste0('{\"nonce\":\"', s, '\", \"event\": \"completed\"}'), file('/proc/self/fd/3')); quit(save = 'no', status = 0)",
        "loops forever": "while (TRUE) {}",
        "sleeps forever": "Sys.sleep(1000)\n    0",
        "allocates without end": "keep <- list()\n    while (TRUE) keep[[length(keep) + 1]] <- numeric(2^22)",
        "floods stdout": "while (TRUE) cat('flood flood flood flood flood flood flood flood flood\\n')",
        "fork bomb": f"system('{SHELL_BOMB}')\n    0",
        "leaves a process behind": f"system('{LEFT_BEHIND}')\n    0",
    },
)

RACKET = Lang(
    template="#lang racket\n\n{prelude}\n\n(define (add a b)\n  {body})\n",
    right="(+ a b)", wrong="(- a b)",
    script="(require rackunit)\n\n(define (test-humaneval) \n\n  (let (( candidate add))\n    (check-equal? (candidate 1 2) 3)\n))\n\n"
           "(test-humaneval)\n",
    io="#lang racket\n(define nums (let loop ([acc '()]) (define x (read)) (if (eof-object? x) acc (loop (cons x acc)))))\n"
       "(displayln (apply + nums))\n",
    syntax_error="#lang racket\n(define (add a b)\n  (+ a b)\n",
    hacks={
        "exits 0 at start": "prelude:(exit 0)",
        "exits 0 in the call": "(exit 0)",
        "forges the report": f"(with-output-to-file \"/proc/self/fd/3\" #:exists 'append (λ () (display \"{FORGED_Q}\"))) (exit 0)",
        "reads the payload for the nonce": "(let ([s (with-handlers ([(λ (e) #t) (λ (e) \"\")]) (call-with-input-file \"/proc/self/fd/4\" read-line))])\n"
                                           "    (with-output-to-file \"/proc/self/fd/3\" #:exists 'append\n"
                                           "      (λ () (printf \"{\\\"nonce\\\":\\\"~a\\\", \\\"event\\\": \\\"completed\\\"}\\n\" s))) (exit 0))",
        "loops forever": "(let loop () (loop))",
        "sleeps forever": "(sleep 1000) 0",
        "allocates without end": "(let loop ([keep '()]) (loop (cons (make-vector (expt 2 22) 1) keep)))",
        "floods stdout": "(let loop () (displayln \"flood flood flood flood flood flood flood flood flood\") (loop))",
        "fork bomb": f"(system \"{SHELL_BOMB}\") 0",
        "leaves a process behind": f"(system \"{LEFT_BEHIND}\") 0",
    },
)

LANGS.update(r=R, racket=RACKET)
