"""The reward cache: sandbox results addressed by what determines them.

The key is a hash of (language, extracted program, tests, resolved limits, the sandbox
fingerprint): everything the verdicts depend on and nothing else, so two completions that
differ only in prose around the same code block share an entry, while a change to a test,
a limit, the sandbox image or the sandbox runtime misses. The sandbox names itself
(``Sandbox.fingerprint(language)``, :mod:`~grpo_code.sandbox.fingerprint`): its image's
identity, the harness version and its default limits. Results are cached, not rewards, so
changing the reward mode reuses them. Infrastructure errors are never stored.

Entries live in a bounded in-memory LRU; with ``rewards.cache_path`` they are also
written to a sqlite file, so eval re-runs and resumed training reuse them across
processes. In-flight duplicates (same key, not finished yet) are shared by
:class:`~grpo_code.verify.verifier.Verifier`, which owns the futures.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections import OrderedDict
from pathlib import Path

from grpo_code.config import SandboxConfig
from grpo_code.errors import RewardError
from grpo_code.sandbox.types import Job, Result, Status
from grpo_code.sandbox.wire import wire_for

SCHEMA_VERSION = 4


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
    """Thread-safe LRU of results by key, optionally backed by a sqlite file."""

    def __init__(self, max_entries: int = 100_000, path: str | Path | None = None):
        self.max_entries = max_entries
        self.path = Path(path).expanduser() if path else None
        self._mem: OrderedDict[str, Result] = OrderedDict()
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
                return hit
            if self._db is None:
                return None
            row = self._db.execute("SELECT result FROM results WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            try:
                result = Result.from_json(row[0])
            except (ValueError, KeyError, TypeError):
                return None
            self._remember(key, result)
            return result

    def put(self, key: str, result: Result) -> bool:
        """Store a result; infrastructure errors are refused (returns False)."""
        if result.status is Status.INFRA_ERROR:
            return False
        with self._lock:
            self._remember(key, result)
            if self._db is not None:
                self._db.execute("INSERT OR REPLACE INTO results VALUES (?, ?, ?)", (key, result.to_json(), time.time()))
                self._db.commit()
        return True

    def _remember(self, key: str, result: Result) -> None:
        self._mem[key] = result
        self._mem.move_to_end(key)
        while len(self._mem) > self.max_entries:
            self._mem.popitem(last=False)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
