// Values between a JavaScript script test's judge and the program's process.
//
// A judged script test (docs/sandbox.md, The judge) runs its code in a trusted node
// process; every call it makes to a program function goes to the program's process as a
// line of JSON and the returned value (or thrown error) comes back the same way. This is
// the encoding of those values, used on both sides: plain data only, with tags for what
// JSON cannot say, so the test sees JavaScript's own values (`=== undefined` is not
// `=== null`, NaN stays NaN, a BigInt stays a BigInt):
//
//   undefined (also an array hole)  {"$u":0}
//   NaN, Infinity, -Infinity, -0    {"$x":"NaN"} ...
//   a BigInt                        {"$g":"123"}
//   an object with a key that starts with "$"   {"$O":[[key, value], ...]}
//   null, booleans, other numbers, strings, arrays, other plain objects: JSON as is
//
// Anything else (a function, a class instance, a getter, a Promise, a symbol key) is not
// plain data: `encode` throws NotPlain. `decode` trusts nothing about its input (the judge
// decodes what the program sent): it rebuilds plain values from parsed JSON only.
'use strict';

const { stringify } = JSON;
const { getPrototypeOf, getOwnPropertyDescriptor, hasOwn, prototype: ObjectProto, keys: objectKeys } = Object;
const { isArray, prototype: ArrayProto } = Array;
const { isFinite: isFinite_ } = Number;
const String_ = String;
const { ownKeys } = Reflect;

class NotPlain extends Error {}

const MAX_ITEMS = 2000000;
const MAX_DEPTH = 200;

function encode(value, depth = 0, budget = { left: MAX_ITEMS }) {
  if (--budget.left < 0 || depth > MAX_DEPTH) throw new NotPlain('value too large or too deeply nested');
  if (value === null) return 'null';
  if (value === undefined) return '{"$u":0}';
  const t = typeof value;
  if (t === 'boolean') return value ? 'true' : 'false';
  if (t === 'number') {
    if (value === 0 && 1 / value < 0) return '{"$x":"-0"}';
    if (isFinite_(value)) return stringify(value);
    return '{"$x":"' + (value !== value ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity') + '"}';
  }
  if (t === 'bigint') return '{"$g":"' + String_(value) + '"}';
  if (t === 'string') return stringify(value);
  if (t !== 'object') throw new NotPlain('a ' + t + ' is not plain data');
  const proto = getPrototypeOf(value);
  if (isArray(value)) {
    if (proto !== ArrayProto) throw new NotPlain('an array of a derived class is not plain data');
    const len = getOwnPropertyDescriptor(value, 'length').value;
    let out = '[';
    for (let i = 0; i < len; i++) {
      const d = getOwnPropertyDescriptor(value, String_(i));
      if (d && !hasOwn(d, 'value')) throw new NotPlain('an array element is a getter');
      out += (i ? ',' : '') + encode(d ? d.value : undefined, depth + 1, budget);
    }
    return out + ']';
  }
  if (proto !== ObjectProto && proto !== null) throw new NotPlain('an object of a class is not plain data');
  const keys = ownKeys(value);
  const pairs = [];
  let tagged = false;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i];
    if (typeof key !== 'string') throw new NotPlain('an object has a symbol key');
    const d = getOwnPropertyDescriptor(value, key);
    if (!d.enumerable) continue;
    if (!hasOwn(d, 'value')) throw new NotPlain('an object property is a getter');
    if (key[0] === '$') tagged = true;
    pairs.push([key, encode(d.value, depth + 1, budget)]);
  }
  if (tagged) return '{"$O":[' + pairs.map(([k, v]) => '[' + stringify(k) + ',' + v + ']').join(',') + ']}';
  return '{' + pairs.map(([k, v]) => stringify(k) + ':' + v).join(',') + '}';
}

const SPECIAL = { NaN: NaN, Infinity: Infinity, '-Infinity': -Infinity, '-0': -0 };

function bad(why) {
  throw new NotPlain('malformed value: ' + why);
}

// A parsed JSON tree back to the value it encodes; plain objects are made afresh (a key
// named __proto__ is an own property, never a prototype).
function decode(tree, depth = 0) {
  if (depth > MAX_DEPTH) bad('nested too deeply');
  if (tree === null || typeof tree !== 'object') return tree;
  if (isArray(tree)) {
    const out = new Array(tree.length);
    for (let i = 0; i < tree.length; i++) out[i] = decode(tree[i], depth + 1);
    return out;
  }
  const keys = objectKeys(tree);
  if (keys.length === 1 && keys[0][0] === '$') {
    const [tag] = keys;
    const body = tree[tag];
    if (tag === '$u') return undefined;
    if (tag === '$x') return hasOwn(SPECIAL, body) ? SPECIAL[body] : bad('unknown number ' + String_(body));
    if (tag === '$g') {
      if (typeof body !== 'string' || !/^-?[0-9]+$/.test(body)) bad('a BigInt is not digits');
      return BigInt(body);
    }
    if (tag === '$O') {
      if (!isArray(body)) bad('$O holds no pairs');
      const out = {};
      for (const pair of body) {
        if (!isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string') bad('$O holds a bad pair');
        Object.defineProperty(out, pair[0], {
          value: decode(pair[1], depth + 1), writable: true, enumerable: true, configurable: true,
        });
      }
      return out;
    }
    bad('unknown tag ' + tag);
  }
  const out = {};
  for (const key of keys) {
    if (key[0] === '$') bad('a bare key that starts with $');
    Object.defineProperty(out, key, { value: decode(tree[key], depth + 1), writable: true, enumerable: true,
      configurable: true });
  }
  return out;
}

// Blocking line I/O on a socket fd: the judge's calls are synchronous, as in-process
// calls are, so the test code stays what it was (no await).
const fs = require('fs');

class TooLong extends Error {}

function lineReader(fd, maxBytes) {
  let pending = [];
  let size = 0;
  const buf = Buffer.alloc(1 << 16);
  return function next() {
    for (;;) {
      const chunk = pending.length ? pending[pending.length - 1] : null;
      const at = chunk ? chunk.indexOf(10) : -1;
      if (at >= 0) {
        const joined = Buffer.concat(pending);
        const end = size - chunk.length + at;
        const line = joined.subarray(0, end).toString('utf8');
        const rest = Buffer.from(joined.subarray(end + 1));
        pending = rest.length ? [rest] : [];
        size = rest.length;
        return line;
      }
      if (size > maxBytes) throw new TooLong('a line over ' + maxBytes + ' bytes');
      let n;
      try {
        n = fs.readSync(fd, buf, 0, buf.length, null);
      } catch (err) {
        // EINTR: a signal the program sent this process (SIGUSR1) interrupted the read
        if (err && (err.code === 'EAGAIN' || err.code === 'EINTR')) continue;
        if (err && (err.code === 'ECONNRESET' || err.code === 'EPIPE')) return null;
        throw err;
      }
      if (!n) return null;
      pending.push(Buffer.from(buf.subarray(0, n)));
      size += n;
    }
  };
}

function writeAll(fd, text) {
  const data = Buffer.from(text, 'utf8');
  let off = 0;
  while (off < data.length) {
    try {
      off += fs.writeSync(fd, data, off, data.length - off);
    } catch (err) {
      if (err && (err.code === 'EAGAIN' || err.code === 'EINTR')) continue;
      throw err;
    }
  }
}

module.exports = { encode, decode, NotPlain, TooLong, lineReader, writeAll };
