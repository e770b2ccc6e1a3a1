// The grpo-code JavaScript test harness: runs one test of one job in a fresh node process.
//
// Started by the executor (grpo_code/sandbox/executor.py) as
// `node --max-old-space-size=M javascript.js`, with the job on fd 4 (read once, then
// closed, before any program code runs) and a private report pipe on fd 3. The program
// and the test code run as two classic scripts in this process's global scope, like
// Python's exec of the program and then of the test in one namespace: what the program
// declares at top level (functions, var, let, const, class) is visible to the test.
//
// The verdict is decided by the executor, not here: this file only reports, with the
// per-test nonce, what it saw (completed, assertion, runtime_error, compile_error,
// memory, returned + value, not_plain). A test passes only when the report says it
// completed; `process.exit(0)` before the tests or printed markers leave no report.
// `console.assert` is made to throw (a failed assertion must not print and continue),
// and the `assert` module, `console`, JSON and a few other builtins are frozen so the
// program cannot disarm the checks the tests use.
'use strict';

const fs = require('fs');
const vm = require('vm');
const path = require('path');
const Module = require('module');
const assert = require('assert');

// References taken before the program runs: rebinding or patching them later (say,
// vm.Script.prototype.runInThisContext, to skip the test code) changes nothing here.
// Report lines are built from stringified primitives by concatenation only, never by
// methods the program could patch, so it cannot splice fields into a report.
const { apply, ownKeys } = Reflect;
const { writeSync } = fs;
const { stringify, parse } = JSON;
const { getPrototypeOf, getOwnPropertyDescriptor, hasOwn, prototype: ObjectProto } = Object;
const { isArray, prototype: ArrayProto } = Array;
const { AssertionError } = assert;
const { isFinite: isFinite_ } = Number;
const String_ = String;
const { runInThisContext, Script: { prototype: { runInThisContext: runScript } } } = vm;
const { exit, stdout: STDOUT, stderr: STDERR } = process;
const streamWrite = STDOUT.write;
const REPORT_FD = 3;
const JOB_FD = 4;
const HERE = __filename;
// Errors thrown while running keep their plain stack (no source excerpt glued in front).
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
const nonce = job.nonce;
// A judged script test's program process (kind "serve") answers the judge's calls with
// values in this encoding; loaded before the program runs, so it holds untouched builtins.
const wire = job.kind === 'serve' ? require('./javascript_wire.js') : null;
let reported = false;

function report(event, fields) {
  if (reported) return;
  reported = true;
  // Built by concatenation of stringified primitives: no toJSON hook of the program applies.
  let line = '{"nonce":' + stringify(String_(nonce)) + ',"event":' + stringify(event);
  if (fields) line += fields;
  line += '}\n';
  // One write of a string to a blocking pipe: a short write (never seen in practice)
  // leaves an unreadable report, which fails the test.
  writeSync(REPORT_FD, line);
}

// A test that did not complete ends at once, like the Python harness does.
function reportAndExit(event, fields) {
  report(event, fields);
  apply(exit, process, [1]);
}

function messageField(text) {
  return ',"message":' + stringify(String_(text).slice(-2000));
}

// ------------------------------------------------------------------ hardening

function failedAssert(value, ...rest) {
  if (!value) {
    const detail = rest.length ? ': ' + rest.map((x) => safeString(x)).join(' ') : '';
    throw new AssertionError({ message: 'console.assert failed' + detail });
  }
}

function lock(obj, name, value) {
  Object.defineProperty(obj, name, { value, writable: false, configurable: false, enumerable: true });
}

lock(console, 'assert', failedAssert);
lock(globalThis, 'console', console);
const strictAssert = assert.strict;
for (const obj of [assert, strictAssert, vm, vm.Script.prototype, JSON, Math, Object, Array, Number, String, Reflect]) {
  Object.freeze(obj);
}
for (const name of ['JSON', 'Math', 'Object', 'Array', 'Number', 'String', 'Reflect', 'Error']) {
  lock(globalThis, name, globalThis[name]);
}

// CommonJS-style globals for the program's scripts, relative to the work dir. `require`
// hands out the frozen assert modules itself, so patching the module loader cannot slip
// a fake `assert` into the test code; `require` and `module` cannot be rebound.
const mainFile = path.join(process.cwd(), 'main.js');
const programModule = new Module(mainFile, null);
programModule.filename = mainFile;
programModule.paths = Module._nodeModulePaths(process.cwd());
const loaderRequire = Module.createRequire(mainFile);
const ASSERT_MODULES = {
  assert: assert,
  'node:assert': assert,
  'assert/strict': strictAssert,
  'node:assert/strict': strictAssert,
};
function programRequire(id) {
  if (typeof id === 'string' && hasOwn(ASSERT_MODULES, id)) return ASSERT_MODULES[id];
  return apply(loaderRequire, undefined, [id]);
}
programRequire.resolve = loaderRequire.resolve;
programRequire.cache = loaderRequire.cache;
lock(globalThis, 'require', programRequire);
lock(globalThis, 'module', programModule);
for (const [name, value] of [
  ['exports', programModule.exports],
  ['__filename', mainFile],
  ['__dirname', process.cwd()],
]) {
  Object.defineProperty(globalThis, name, { value, writable: true, configurable: true, enumerable: false });
}

// ------------------------------------------------------------------ helpers

function safeString(value) {
  try {
    return String_(value);
  } catch (_) {
    return '<unprintable value>';
  }
}

function describe(err) {
  let text;
  try {
    text = err && typeof err.stack === 'string' ? err.stack : safeString(err);
  } catch (_) {
    text = '<an exception that cannot be described>';
  }
  // The harness's own frames say nothing about the program.
  return text
    .split('\n')
    .filter((line) => !line.includes(HERE) && !line.includes('node:vm') && !line.includes('node:internal'))
    .join('\n');
}

function isAssertion(err) {
  try {
    return err instanceof AssertionError || (err instanceof Error && err.name === 'AssertionError');
  } catch (_) {
    return false;
  }
}

function isOutOfMemory(err) {
  try {
    return err instanceof RangeError && /allocation failed/i.test(err.message);
  } catch (_) {
    return false;
  }
}

class NotPlain extends Error {}

// Plain data only: null/undefined, booleans, finite and non-finite numbers, BigInts,
// strings, arrays and objects made by literals, read through own data properties (no
// getters, no toJSON, no prototypes of the program's making). Built by concatenation.
function toJson(value, depth, budget) {
  if (--budget.left < 0 || depth > 100) throw new NotPlain('value too large or too deeply nested');
  if (value === null || value === undefined) return 'null';
  const t = typeof value;
  if (t === 'boolean') return value ? 'true' : 'false';
  if (t === 'number') {
    if (isFinite_(value)) return stringify(value);
    if (value !== value) return 'NaN';
    return value > 0 ? 'Infinity' : '-Infinity';
  }
  if (t === 'bigint') return String_(value);
  if (t === 'string') return stringify(value);
  if (t !== 'object') throw new NotPlain('returned a ' + t + ', which is not plain data');
  const proto = getPrototypeOf(value);
  if (isArray(value)) {
    if (proto !== ArrayProto) throw new NotPlain('returned an array of a derived class');
    const len = getOwnPropertyDescriptor(value, 'length').value;
    let out = '[';
    for (let i = 0; i < len; i++) {
      const d = getOwnPropertyDescriptor(value, String_(i));
      if (d && !hasOwn(d, 'value')) throw new NotPlain('an array element is a getter');
      out += (i ? ',' : '') + toJson(d ? d.value : undefined, depth + 1, budget);
    }
    return out + ']';
  }
  if (proto !== ObjectProto && proto !== null) throw new NotPlain('returned an object of a class, which is not plain data');
  const keys = ownKeys(value);
  let out = '{';
  let first = true;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i];
    if (typeof key !== 'string') throw new NotPlain('an object has a symbol key');
    const d = getOwnPropertyDescriptor(value, key);
    if (!d.enumerable) continue;
    if (!hasOwn(d, 'value')) throw new NotPlain('an object property is a getter');
    out += (first ? '' : ',') + stringify(key) + ':' + toJson(d.value, depth + 1, budget);
    first = false;
  }
  return out + '}';
}

function findFunction(name) {
  // Top-level let/const/class bindings are not properties of globalThis; look the name up
  // in the global scope the program ran in, then in module.exports.
  let fn;
  try {
    fn = apply(runInThisContext, vm, ['typeof ' + name + " === 'function' ? " + name + ' : undefined']);
  } catch (_) {
    fn = undefined;
  }
  if (typeof fn !== 'function') {
    const exported = programModule.exports;
    if (exported && typeof exported[name] === 'function') fn = exported[name];
    else if (typeof exported === 'function' && exported.name === name) fn = exported;
  }
  return fn;
}

// ------------------------------------------------------------------ serving a judge

// A judged script test: this process holds the program and no test. It tells the judge
// (on fd 3, a socket whose other end is the judge's) which of the names the test uses are
// the program's functions, then answers one call at a time: the returned value in the
// wire encoding, or the thrown error's name and message. A load failure is reported on
// the same socket (compile_error, runtime_error) and only ever fails the test.
function serve() {
  const functions = {};
  const names = [];
  for (const name of job.names) {
    const fn = findFunction(name);
    if (typeof fn === 'function') {
      functions[name] = fn;
      names.push(name);
    }
  }
  wire.writeAll(REPORT_FD, '{"manifest":' + stringify(names) + '}\n');
  const next = wire.lineReader(REPORT_FD, 1 << 30);
  for (;;) {
    const line = next();
    if (line === null) apply(exit, process, [0]);  // the judge is done
    let reply;
    try {
      const request = parse(line);
      const fn = hasOwn(functions, request.fn) ? functions[request.fn] : undefined;
      const value = apply(fn, undefined, wire.decode(request.args));
      reply = '{"value":' + wire.encode(value) + '}';
    } catch (err) {
      if (err instanceof wire.NotPlain) reply = '{"not_plain":' + stringify(String_(err.message)) + '}';
      else reply = '{"error":' + thrown(err) + '}';
    }
    wire.writeAll(REPORT_FD, reply + '\n');
  }
}

function thrown(err) {
  let name = 'Error';
  let message;
  try {
    if (err instanceof Error) {
      name = safeString(err.name);
      message = safeString(err.message);
    } else {
      message = 'a thrown ' + typeof err + ': ' + safeString(err);
    }
  } catch (_) {
    message = '<an exception that cannot be described>';
  }
  return '{"name":' + stringify(String_(name).slice(0, 200)) + ',"message":' + stringify(String_(message).slice(-2000)) +
    ',"stack":' + stringify(describe(err).slice(-2000)) + '}';
}

// ------------------------------------------------------------------ the test

let completed = false;
// The report of a test that completed is written once the event loop is empty, so work
// the test queued (timers, promises) runs first; process.exit() skips 'beforeExit', and an
// error thrown later ends the process with a non-zero status: neither passes.
process.on('beforeExit', () => {
  if (completed) report('completed');
});

function run() {
  let program;
  try {
    program = new vm.Script(job.program, { filename: 'main.js' });
  } catch (err) {
    reportAndExit('compile_error', messageField(describe(err)));
    return;
  }
  let testScript = null;
  if (job.kind === 'script') {
    try {
      testScript = new vm.Script(job.code, { filename: 'test.js' });
    } catch (err) {
      reportAndExit('runtime_error', messageField('the test code does not compile: ' + describe(err)));
      return;
    }
  }
  try {
    apply(runScript, program, [RUN_OPTIONS]);
    if (job.kind === 'io') {
      completed = true;
      return;
    }
    if (job.kind === 'serve') {
      afterOutput(() => {
        try {
          serve();
        } catch (err) {
          failed(err);
        }
      });
      return;
    }
    if (job.kind === 'script') {
      apply(runScript, testScript, [RUN_OPTIONS]);
      completed = true;
      return;
    }
    const fn = findFunction(job.fn);
    if (typeof fn !== 'function') {
      reportAndExit('runtime_error', messageField("function '" + job.fn + "' is not defined"));
      return;
    }
    const value = apply(fn, undefined, job.args);
    if (value === undefined) {
      // Not null: a test that expects null (`=== null`) fails on it in JavaScript.
      reportAndExit('not_plain', messageField('returned undefined (no return value)'));
      return;
    }
    let json;
    try {
      json = toJson(value, 0, { left: 100000 });
    } catch (err) {
      if (err instanceof NotPlain) {
        reportAndExit('not_plain', messageField(err.message));
        return;
      }
      throw err;
    }
    report('returned', ',"value":' + json);
    apply(exit, process, [0]);
  } catch (err) {
    failed(err);
  }
}

function failed(err) {
  if (isAssertion(err)) reportAndExit('assertion', messageField(describe(err)));
  else if (isOutOfMemory(err)) reportAndExit('memory');
  else reportAndExit('runtime_error', messageField(describe(err)));
}

// What the program printed and node still holds (its writes to a full pipe wait in node's
// queue for the event loop) is written out before `then` runs. A judged test's program
// process serves calls synchronously from then on and is killed once the judge is done,
// so output still held would be lost: an empty write's callback runs after every write
// queued before it.
function afterOutput(then) {
  let left = 2;
  const one = () => {
    left -= 1;
    if (left === 0) then();
  };
  apply(streamWrite, STDOUT, ['', one]);
  apply(streamWrite, STDERR, ['', one]);
}

run();
