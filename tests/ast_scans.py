"""Helpers of the tests that scan the package's syntax trees (test_layout, test_trl_seam)."""

from __future__ import annotations

import ast


def assigned_attributes(node: ast.AST) -> list[ast.Attribute]:
    """The attributes an assignment statement sets (``x.a = ...``, ``x.a, y.b = ...``,
    ``x.a += ...``, ``x.a: T = ...``); none for any other node."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
        node, ast.AugAssign | ast.AnnAssign) else []
    return [t for target in targets for t in (target.elts if isinstance(target, ast.Tuple) else [target])
            if isinstance(t, ast.Attribute)]
