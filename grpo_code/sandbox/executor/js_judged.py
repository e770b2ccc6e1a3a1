"""What the program's process of a judged JavaScript script test is told: the names the
test may take from it (``runners.py`` puts them in its payload; ``harness/javascript.js``
answers which are its functions). Standard library only.
"""

from __future__ import annotations

import re

_JS_NAME = re.compile(r"[A-Za-z_$][\w$]*")
_JS_TEXT = re.compile(r"""//[^\n]*|/\*.*?\*/|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"|`(?:\\.|[^`\\])*`""", re.S)


def names(job: dict, code: str) -> list[str]:
    """The names a JavaScript test may take from the program, which the program's process
    is told (it answers which are its functions; the judge makes stand-ins of those). The
    job's entry point, where it names one (the adapters set it): nothing the program is
    told comes from the test. Without one, the test's identifiers outside its strings,
    comments and template literals (a word of an expected string, `=== 'lm'`, must not
    reach the program, which could watch the lookups)."""
    entry = job.get("entry_point")
    if isinstance(entry, str) and _JS_NAME.fullmatch(entry):
        return [entry]
    return sorted(set(_JS_NAME.findall(_JS_TEXT.sub(" ", code))))
