"""A job's tests encoded once for the wire, and the large expected values held back.

:class:`EncodedTests` is what every job of a task sends (``Task.encoded_tests``,
``Job.encoded_tests``); :func:`encode_tests` makes it, with the digests of large expected
values (:func:`large_expected`) and the held-back copy of the tests the host sends first.
"""

from __future__ import annotations

import hashlib
import json
from functools import cached_property
from typing import Any


class EncodedTests:
    """A job's tests as the wire carries them, encoded once: a task's jobs share its copy, so
    a suite with hundreds of tests (and large expected values) per task is not written out
    again for every program (``Task.job``)."""

    def __init__(self, dicts: list[dict[str, Any]], texts: list[str] | None, digest: str,
                 held: EncodedTests | None = None, sha: dict[int, str] | None = None):
        self.dicts = dicts
        self.digest = digest
        """sha256 of the tests as sent with large values held back: what a store key says of them."""
        self.held = held
        """The same tests with each large expected value held back on the host (only its
        ``expected_sha256`` and ``expected_held`` travel); ``None`` when no value is large."""
        self._texts = texts
        self.large = sha or {}
        """The sha256 of each large expected value, by test index (:func:`large_expected`)."""

    @property
    def texts(self) -> list[str]:
        """Each test as the executor receives it (``json.dumps``, with ``expected_sha256`` for a
        large expected value); written out the first time a job needs them whole."""
        if self._texts is None:
            self._texts = [json.dumps(d) for d in self._sent()]
        return self._texts

    def _sent(self) -> list[dict[str, Any]]:
        """The tests as the executor receives them: a large expected value also carries its sha256."""
        if not self.large:
            return self.dicts
        return [{**d, "expected_sha256": self.large[i]} if i in self.large else d for i, d in enumerate(self.dicts)]

    @cached_property
    def text(self) -> str:
        """The list of them (written in one ``json.dumps`` when the tests were not written
        out one by one: the same text, for a fraction of the calls)."""
        if self._texts is not None:
            return "[" + ", ".join(self._texts) + "]"
        return json.dumps(self._sent())

    def part(self, start: int, end: int) -> EncodedTests:
        """Tests ``start:end`` (a job sent in parts); its digest is left empty."""
        return EncodedTests(self.dicts[start:end], self.texts[start:end], "")


EXPECTED_DIGEST_BYTES = 32 * 1024
"""A call test whose expected value's JSON is longer also carries its sha256
(``expected_sha256``): an answer written exactly so passes on the digest, in the executor,
without the value being written out again or decoded (``executor/calls.py``). A Python
job is first sent with such values held back (:attr:`EncodedTests.held`): an answer that
is not written exactly so is ``undecided`` there, and the job is then sent whole
(``node.py``)."""


def _digest_eligible(test: dict[str, Any]) -> bool:
    return test.get("kind") == "call" and "expected" in test and not test.get("checker")


def large_expected(dicts: list[dict[str, Any]]) -> dict[int, str]:
    """The sha256 of each expected value whose JSON is over :data:`EXPECTED_DIGEST_BYTES`, by
    test index (what the reference oracle stores beside the values, so that loading them
    does not write them out again)."""
    out = {}
    for i, d in enumerate(dicts):
        if _digest_eligible(d):
            text = json.dumps(d["expected"])
            if len(text) > EXPECTED_DIGEST_BYTES:
                out[i] = hashlib.sha256(text.encode()).hexdigest()
    return out


def encode_tests(tests: tuple[Any, ...], large: dict[int, str] | None = None) -> EncodedTests:
    """``large``: :func:`large_expected` of these tests, when known (else computed here)."""
    dicts = [t.to_dict() for t in tests]
    sha = large_expected(dicts) if large is None else {i: h for i, h in large.items() if _digest_eligible(dicts[i])}
    if not sha:
        encoded = EncodedTests(dicts, None, "")
        encoded.digest = hashlib.sha256(encoded.text.encode()).hexdigest()
        return encoded
    held_dicts = [{**{k: v for k, v in d.items() if k != "expected"}, "expected_sha256": sha[i], "expected_held": True}
                  if i in sha else d for i, d in enumerate(dicts)]
    held = EncodedTests(held_dicts, None, "")
    # The held texts name each large value by its sha256: they address the tests' content.
    return EncodedTests(dicts, None, hashlib.sha256(held.text.encode()).hexdigest(), held, sha)
