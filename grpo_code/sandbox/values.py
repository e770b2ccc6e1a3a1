"""Values as suites write them: the value codec's trees (:mod:`.executor.codec`, shared
with the executor), with a dict of string keys as a plain JSON object.

Only the host writes suites (the evalplus and docstring-example converters), so the
writer lives here, outside the image; its reader, ``from_tree(..., plain_objects=True)``,
is the codec's, which the executor uses too.
"""

from __future__ import annotations

from typing import Any

from grpo_code.sandbox.executor.codec import TAGS, to_tree


def suite_tree(value: Any) -> Any:
    """``value`` in the form suites write: :func:`~.executor.codec.to_tree`, but a dict with
    string keys is a plain JSON object."""
    return _plain_dicts(to_tree(value))


def _plain_dicts(tree: Any) -> Any:
    if type(tree) is list:
        return [_plain_dicts(v) for v in tree]
    if type(tree) is not dict:
        return tree
    tag, body = next(iter(tree.items()))
    if tag == "$d":
        pairs = [[_plain_dicts(k), _plain_dicts(v)] for k, v in body]
        if all(type(k) is str for k, _ in pairs) and not (len(pairs) == 1 and pairs[0][0] in TAGS):
            return {k: v for k, v in pairs}
        return {"$d": pairs}
    if tag in ("$t", "$s", "$f") or (tag == "$k" and body[0] != "Fraction"):
        return {tag: _plain_dicts(body)}
    return tree
