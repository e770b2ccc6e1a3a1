"""The reward cache: sandbox results addressed by what determines them.

The key is a hash of (language, extracted program, tests, resolved limits, the sandbox
fingerprint): everything the verdicts depend on and nothing else, so two completions that
differ only in prose around the same code block share an entry, while a change to a test,
a limit, the sandbox image or the sandbox runtime misses. The sandbox names itself
(``Sandbox.fingerprint(language)``, :mod:`~grpo_code.sandbox.fingerprint`): its image's
identity, the harness version and its default limits. Results are cached, not rewards, so
switching between ``pass_fraction`` and ``weighted`` reuses them; ``all_or_nothing`` (and
``stop_at_first_failure``) runs stop at the first failing test, which is part of the job and
so of the key. Infrastructure errors are never stored.

Entries live in an in-memory LRU bounded in entries and in bytes; with
``rewards.cache_path`` training also writes them to a sqlite file, so a resumed or repeated
run reuses them across processes. Eval keeps an in-memory store only: its verdicts persist
in its own ``results.jsonl``. What an entry keeps is bounded too (:func:`stored`):
every verdict and time, the first failing test's output and message as the sandbox kept
them (what failure reports and feedback quote), and of the other tests a clipped message,
no output. A result's size is then its test count, not what its program printed. In-flight duplicates (same key, not finished yet) are shared by
:class:`~grpo_code.verify.verifier.Verifier`, which owns the futures.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
import sys
import threading
import time
from collections import OrderedDict
from pathlib import Path

from grpo_code.config import SandboxConfig
from grpo_code.errors import RewardError
from grpo_code.sandbox.types import Job, Result, Status
from grpo_code.sandbox.wire import wire_for
from grpo_code.verify.failure import MESSAGE_CHARS, clip

SCHEMA_VERSION = 4
RESULT_BYTES = 600
TEST_BYTES = 210
"""Memory of a result and of each of its tests with no text (measured: a ``Result`` read
from JSON); :func:`footprint` adds the texts' own size."""


FAILURE_CHARS = 256 * 1024
"""Characters kept of each text of the first failing test: past the sandbox's own per-test
cap (``max_output_kb``, 64 KiB by default), which cuts first; a bound on what any backend
may send."""


def stored(result: Result) -> Result:
    """What the store keeps of ``result``: every verdict and time; the first failing test's
    output and message (cut at :data:`FAILURE_CHARS`), the other tests' messages clipped
    (:func:`~grpo_code.verify.failure.clip`) and their output dropped."""
    first = result.first_failure()
    keep = first[0] if first is not None else None

    def cut(test, limit: int, output: bool):
        texts = {"stdout": clip(test.stdout, limit) if output else "",
                 "stderr": clip(test.stderr, limit) if output else "",
                 "message": clip(test.message, limit)}
        if all(text == getattr(test, name) for name, text in texts.items()):
            return test
        return dataclasses.replace(test, **texts)

    tests = tuple(cut(t, FAILURE_CHARS, True) if i == keep else cut(t, MESSAGE_CHARS, False)
                  for i, t in enumerate(result.tests))
    if all(a is b for a, b in zip(tests, result.tests)):
        return result
    return dataclasses.replace(result, tests=tests)


def footprint(result: Result) -> int:
    """Bytes ``result`` takes in memory, near enough to bound a store by."""
    texts = sum(sys.getsizeof(text) for t in result.tests for text in (t.stdout, t.stderr, t.message) if text)
    return RESULT_BYTES + TEST_BYTES * len(result.tests) + texts + (sys.getsizeof(result.error) if result.error else 0)


def cache_key(job: Job, sandbox: SandboxConfig, fingerprint: str) -> str:
    """Content address of a job's result: limits resolved against the sandbox config, and the
    sandbox's ``fingerprint`` for the job's language (``Sandbox.fingerprint``). The tests enter
    by their digest (computed once per task), everything else the job says as it is."""
    wire = wire_for(job, sandbox)
    payload = {
        "v": SCHEMA_VERSION,
        **{k: v for k, v in wire.items() if k != "tests"},
        "tests": job.encoded_tests.digest,
        "sandbox": fingerprint,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class RewardCache:
    """Thread-safe LRU of results by key (at most ``max_entries`` and ``max_bytes`` of
    memory, by :func:`footprint`), optionally backed by a sqlite file. It keeps what
    :func:`stored` keeps of each result."""

    def __init__(self, max_entries: int = 100_000, path: str | Path | None = None, max_bytes: int = 512 << 20):
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self.path = Path(path).expanduser() if path else None
        self._mem: OrderedDict[str, tuple[Result, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        if self.path is not None:
            self._db = self._open(self.path)

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # WAL stays consistent; a crash loses only recent entries
            db.execute("CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, result TEXT NOT NULL, "
                       "created REAL NOT NULL)")
            db.commit()
        except (OSError, sqlite3.Error) as exc:
            raise RewardError(f"cannot open the reward cache {str(path)!r} ({exc})",
                              "set rewards.cache_path to a writable file, or null for memory only") from None
        return db

    def __len__(self) -> int:
        with self._lock:
            return len(self._mem)

    def get(self, key: str) -> Result | None:
        """The cached result, from memory or disk (a disk hit is promoted to memory)."""
        with self._lock:
            hit = self._mem.get(key)
            if hit is not None:
                self._mem.move_to_end(key)
                return hit[0]
            if self._db is None:
                return None
            row = self._db.execute("SELECT result FROM results WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            try:
                result = stored(Result.from_json(row[0]))  # a file an older version wrote may hold more
            except (ValueError, KeyError, TypeError):
                return None
            self._remember(key, result)
            return result

    def put(self, key: str, result: Result) -> bool:
        """Store a result; infrastructure errors are refused (returns False)."""
        if result.status is Status.INFRA_ERROR:
            return False
        result = stored(result)
        with self._lock:
            self._remember(key, result)
            if self._db is not None:
                self._db.execute("INSERT OR REPLACE INTO results VALUES (?, ?, ?)", (key, result.to_json(), time.time()))
                self._db.commit()
        return True

    def _remember(self, key: str, result: Result) -> None:
        size = footprint(result)
        old = self._mem.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        self._mem[key] = (result, size)
        self.bytes += size
        # The newest entry stays even alone over max_bytes: its caller holds it anyway.
        while len(self._mem) > 1 and (len(self._mem) > self.max_entries or self.bytes > self.max_bytes):
            self.bytes -= self._mem.popitem(last=False)[1][1]

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
