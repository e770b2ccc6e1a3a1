// The judge of a JavaScript script test: the test's code, run where the program cannot reach.
//
// Started by the executor (native.py, run_judged_test) as a node process of its own, from
// a copy of node the sandbox's user can execute but not read, so the kernel makes it
// non-dumpable: the program's process (same uid) can neither ptrace it nor read its
// memory or fds. It gets the test on fd 4 (code, helpers, nonce; read once, then closed),
// its report pipe to the executor on fd 3, and on fd 7 a socket to the program's process
// (harness/javascript.js in "serve" mode), which holds the program and nothing of the test.
//
// The program's process first sends its manifest: which of the names the test uses are
// its functions. Each becomes a global stand-in here that sends the call's arguments and
// waits for the answer (a value in harness/javascript_wire.js's encoding, or the thrown
// error), synchronously, so the test code runs unchanged. The task's helpers (the
// prompt's own definitions, such as encodeCyclic or poly) run here before the test, so a
// test calls the task's version of such a name, never the program's. Every comparison of
// the test runs on values this process decoded itself.
//
// Report (one line, with the nonce): completed (once the event loop is empty), assertion,
// raised (the program threw and the test did not catch it), program (the program failed
// to load: its own event), program_gone, protocol, not_plain, memory, error (the test
// failed by itself). A program that broke the channel once cannot make a later
// `completed` count: the first such event is the report.
'use strict';

const fs = require('fs');
const vm = require('vm');
const path = require('path');
const Module = require('module');
const assert = require('assert');
const wire = require('./javascript_wire.js');

const { stringify, parse } = JSON;
const { hasOwn, defineProperty } = Object;
const { isArray } = Array;
const { AssertionError } = assert;
const String_ = String;
const REPORT_FD = 3;
const JOB_FD = 4;
const PROGRAM_FD = 7;
const HERE = __filename;
const WIRE = require.resolve('./javascript_wire.js');
const RUN_OPTIONS = Object.freeze({ displayErrors: false });

function readJob() {
  const chunks = [];
  const buf = Buffer.alloc(1 << 16);
  for (;;) {
    const n = fs.readSync(JOB_FD, buf, 0, buf.length, null);
    if (!n) break;
    chunks.push(Buffer.from(buf.subarray(0, n)));
  }
  fs.closeSync(JOB_FD);
  return parse(Buffer.concat(chunks).toString('utf8'));
}

const job = readJob();
let reported = false;

function report(event, fields) {
  if (reported) return;
  reported = true;
  wire.writeAll(REPORT_FD, '{"nonce":' + stringify(job.nonce) + ',"event":' + stringify(event) + (fields || '') + '}\n');
}

function finish(event, fields) {
  report(event, fields);
  process.exit(1);
}

function messageField(text) {
  return ',"message":' + stringify(String_(text).slice(-2000));
}

function describe(err) {
  let text;
  try {
    text = err && typeof err.stack === 'string' ? err.stack : String_(err);
  } catch (_) {
    text = '<an exception that cannot be described>';
  }
  return text
    .split('\n')
    .filter((line) => !line.includes(HERE) && !line.includes(WIRE) && !line.includes('node:vm') &&
      !line.includes('node:internal'))
    .join('\n');
}

// ------------------------------------------------------------------ the test's world

// As in the program's harness: a failed console.assert throws, `require` gives the assert
// modules, and the CommonJS names a test script may use exist.
defineProperty(console, 'assert', {
  value(value, ...rest) {
    if (!value) {
      const detail = rest.length ? ': ' + rest.map((x) => String_(x)).join(' ') : '';
      throw new AssertionError({ message: 'console.assert failed' + detail });
    }
  },
  writable: false, configurable: false, enumerable: true,
});
const testFile = path.join(process.cwd(), 'test.js');
const testModule = new Module(testFile, null);
testModule.filename = testFile;
// Node's built-in modules only: the work dir is the program's too, and a node_modules it
// wrote there while the test ran must never load into the judge.
const loaderRequire = Module.createRequire(testFile);
const BUILTIN = new Set(Module.builtinModules);
function testRequire(id) {
  const bare = typeof id === 'string' && id.startsWith('node:') ? id.slice(5) : id;
  if (!BUILTIN.has(bare)) throw new Error(`a test may require only node's built-in modules, not ${String_(id)}`);
  return loaderRequire(id);
}
// `assert` too, as node's REPL has it: a test that calls a bare assert(...) calls node's,
// never a function of the program's named so (a stand-in is made only where the judge
// has no such name).
for (const [name, value] of [['require', testRequire], ['module', testModule],
  ['exports', testModule.exports], ['__filename', testFile], ['__dirname', process.cwd()], ['assert', assert]]) {
  defineProperty(globalThis, name, { value, writable: true, configurable: true, enumerable: false });
}

// ------------------------------------------------------------------ calls into the program

class ProgramGone extends Error {}
class Protocol extends Error {}
class NotPlainAnswer extends Error {}

const fromProgram = new WeakSet();
let broken = null; // the first [event, message] of a broken channel: it decides the report

function breaks(err) {
  if (broken === null) {
    if (err instanceof ProgramGone) broken = ['program_gone', 'the program\'s process ended during the test'];
    else if (err instanceof NotPlainAnswer) broken = ['not_plain', err.message];
    else broken = ['protocol', err.message];
  }
  return err;
}

const nextLine = wire.lineReader(PROGRAM_FD, job.max_bytes);

function receive() {
  let line;
  try {
    line = nextLine();
  } catch (err) {
    if (err instanceof wire.TooLong) throw breaks(new Protocol('an answer over the size limit'));
    throw breaks(new ProgramGone());
  }
  if (line === null) throw breaks(new ProgramGone());
  let msg;
  try {
    msg = parse(line);
  } catch (_) {
    throw breaks(new Protocol('an unreadable answer'));
  }
  if (msg === null || typeof msg !== 'object' || isArray(msg)) throw breaks(new Protocol('an answer that is not an object'));
  return msg;
}

const ERRORS = { Error, TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError };

function programError(info) {
  if (info === null || typeof info !== 'object' || typeof info.name !== 'string' || typeof info.message !== 'string') {
    throw breaks(new Protocol('a malformed exception'));
  }
  const Ctor = hasOwn(ERRORS, info.name) ? ERRORS[info.name] : Error;
  const err = new Ctor(info.message);
  if (Ctor === Error && info.name !== 'Error') defineProperty(err, 'name', { value: info.name, configurable: true });
  err.programStack = typeof info.stack === 'string' ? info.stack : '';
  fromProgram.add(err);
  return err;
}

function standIn(name) {
  const call = function (...args) {
    if (broken !== null) throw new ProgramGone();
    let text;
    try {
      text = wire.encode(args);
    } catch (err) {
      if (err instanceof wire.NotPlain) throw new TypeError(`cannot pass this to the program's ${name}: ${err.message}`);
      throw err;
    }
    try {
      wire.writeAll(PROGRAM_FD, '{"fn":' + stringify(name) + ',"args":' + text + '}\n');
    } catch (_) {
      throw breaks(new ProgramGone());
    }
    const reply = receive();
    if (hasOwn(reply, 'value')) {
      try {
        return wire.decode(reply.value);
      } catch (err) {
        throw breaks(new Protocol(err.message));
      }
    }
    if (hasOwn(reply, 'error')) throw programError(reply.error);
    if (hasOwn(reply, 'not_plain')) {
      throw breaks(new NotPlainAnswer(`${name} returned a value that is not plain data (${String_(reply.not_plain)})`));
    }
    throw breaks(new Protocol('an answer of no known kind'));
  };
  defineProperty(call, 'name', { value: name });
  return call;
}

// ------------------------------------------------------------------ running it

function isAssertion(err) {
  return err instanceof AssertionError || (err instanceof Error && err.name === 'AssertionError');
}

function fail(err) {
  if (broken !== null) finish(broken[0], messageField(broken[1]));
  if (fromProgram.has(err)) {
    finish('raised', messageField(`the program raised ${err.name}: ${err.message}\n${err.programStack}`));
  }
  if (isAssertion(err)) finish('assertion', messageField(describe(err)));
  if (err instanceof RangeError && /allocation failed/i.test(err.message)) finish('memory', messageField(err.message));
  finish('error', messageField(describe(err)));
}

let completed = false;
process.on('beforeExit', () => {
  if (!completed) return;
  if (broken !== null) report(broken[0], messageField(broken[1]));
  else report('completed');
});
process.on('uncaughtException', fail);
process.on('unhandledRejection', fail);

function run() {
  let scripts;
  try {
    scripts = [job.helpers ? new vm.Script(job.helpers, { filename: 'helpers.js' }) : null,
      new vm.Script(job.code, { filename: 'test.js' })];
  } catch (err) {
    finish('error', messageField('the test code does not compile: ' + describe(err)));
    return;
  }
  const first = receive();
  if (!isArray(first.manifest)) {
    // The program did not load: its own report (compile_error, runtime_error, ...).
    const event = typeof first.event === 'string' ? first.event : 'runtime_error';
    finish('program', ',"program":' + stringify({ event, message: String_(first.message || '') }));
    return;
  }
  for (const name of first.manifest) {
    // The test's own world (builtins, console, require) is never the program's.
    if (typeof name !== 'string' || !/^[A-Za-z_$][\w$]*$/.test(name) || name in globalThis) continue;
    defineProperty(globalThis, name, { value: standIn(name), writable: true, configurable: true, enumerable: false });
  }
  for (const script of scripts) if (script !== null) script.runInThisContext(RUN_OPTIONS);
  completed = true;
}

try {
  run();
} catch (err) {
  fail(err);
}
