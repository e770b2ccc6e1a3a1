"""What the host knows of each sandbox language beyond what the executor needs to run it.

The runners themselves (:mod:`.executor.runners`) are part of the sandbox image and of its
hash; facts only the host acts on live here, so changing how the host treats a language
leaves the image, its fingerprint and every stored verdict as they are.
"""

from __future__ import annotations

from grpo_code.sandbox.executor.runners import RUNNERS

LANGUAGES = tuple(RUNNERS)
"""The languages the sandbox runs, in the executor's order (Python first)."""

COMPILED = frozenset({"cpp"})
"""Languages whose jobs are built before their tests run: the host sends the compile limits,
adds the build time to a job's deadline and sizes the container for the compiler."""

CALL_TESTS = frozenset({"python", "javascript", "cpp"})
"""Languages that take ``call`` tests (a function called with values); the others take
``script`` and ``io`` tests only, and a suite that gives them call tests is refused."""
