"""LeetCode's linked-list and binary-tree nodes, as its judge provides them, and their encoding.

LeetCode's judge (and the datasets copied from it: rllm's DeepCoder, LeetCodeDataset) gives
every program ``ListNode`` and ``TreeNode`` and gives every test the builders ``list_node``
and ``tree_node`` (from LeetCode's list notation, ``[1, 2, None, 3]``) and the comparators
``is_same_list`` and ``is_same_tree``. Here they are trusted code: a LeetCode task's prelude
imports the classes into the program's namespace, and its helpers bind all six in the
judge after the program's names (docs/tasks.md, LeetCode), so a program's
``is_same_tree`` that says True never judges anything.

Nodes cross the judge's channel as values (:func:`encode`, tag ``$n`` of ``codec.py``): a
list of ``[val, next]`` or ``[val, left, right]`` rows whose links are row numbers (-1 for
None), so shared nodes and cycles survive and no recursion limit is met. The receiver
builds nodes of its own classes (:func:`decode`): the judge its trusted ones, the program
its namespace's ``TreeNode``/``ListNode``. The comparators read plain attributes of
trusted nodes only, and never a node's truth value. Standard library only.
"""

from __future__ import annotations

from collections import deque

_type = type
KINDS = {"ListNode": ("val", "next"), "TreeNode": ("val", "left", "right")}


class ListNode:
    def __init__(self, val=0, next=None):
        self.val = val
        self.next = next

    def __repr__(self) -> str:
        return f"ListNode({self.val!r})"


class TreeNode:
    def __init__(self, val=0, left=None, right=None):
        self.val = val
        self.left = left
        self.right = right

    def __repr__(self) -> str:
        return f"TreeNode({self.val!r})"


CLASSES = {"ListNode": ListNode, "TreeNode": TreeNode}


def list_node(values):
    """A linked list of ``values``; None for an empty list."""
    head = None
    for value in reversed(list(values)):
        head = ListNode(value, head)
    return head


def tree_node(values):
    """A binary tree from LeetCode's level order (``None`` for a missing child)."""
    values = list(values)
    if not values or values[0] is None:
        return None
    root = TreeNode(values[0])
    queue, i = deque([root]), 1
    while queue and i < len(values):
        node = queue.popleft()
        if i < len(values) and values[i] is not None:
            node.left = TreeNode(values[i])
            queue.append(node.left)
        i += 1
        if i < len(values) and values[i] is not None:
            node.right = TreeNode(values[i])
            queue.append(node.right)
        i += 1
    return root


def _check(node, cls, name: str) -> None:
    if node is not None and _type(node) is not cls:
        raise TypeError(f"{name} compares {cls.__name__} values, not {_type(node).__name__}")


def is_same_list(p, q) -> bool:
    """Whether two linked lists hold the same values in the same order."""
    seen = 0
    while p is not None and q is not None:
        _check(p, ListNode, "is_same_list")
        _check(q, ListNode, "is_same_list")
        if not (p.val == q.val):
            return False
        p, q = p.next, q.next
        seen += 1
        if seen > 10_000_000:
            raise ValueError("is_same_list: a list longer than 10,000,000 nodes (a cycle?)")
    _check(p, ListNode, "is_same_list")
    _check(q, ListNode, "is_same_list")
    return p is None and q is None


def is_same_tree(p, q) -> bool:
    """Whether two binary trees have the same shape and values."""
    stack = [(p, q)]
    while stack:
        a, b = stack.pop()
        _check(a, TreeNode, "is_same_tree")
        _check(b, TreeNode, "is_same_tree")
        if a is None or b is None:
            if a is not b:
                return False
            continue
        if not (a.val == b.val):
            return False
        stack.append((a.right, b.right))
        stack.append((a.left, b.left))
    return True


def kind_of(value) -> str | None:
    """``ListNode`` or ``TreeNode`` when ``value`` is such a node (its class or a base of it
    has that name, and it has the link attributes, in ``__dict__`` or slots), else None."""
    try:
        names = [k.__name__ for k in _type(value).__mro__]
    except (AttributeError, TypeError):
        return None
    name = next((n for n in names if _type(n) is str and n in KINDS), None)
    if name is None or _state(value, KINDS[name]) is None:
        return None
    return name


def _state(node, fields) -> dict | None:
    """The node's value and links, or None when one is missing."""
    state = {}
    for f in fields:
        try:
            state[f] = getattr(node, f)
        except Exception:
            return None
    return state


def encode(value, kind: str, encode_value, budget: list) -> dict:
    """``value``'s nodes as rows of ``[val, links...]`` (links are row numbers, -1 for None)."""
    fields = KINDS[kind]
    rows: list = []
    index: dict = {id(value): 0}
    order = [value]
    while len(rows) < len(order):
        node = order[len(rows)]
        budget[0] -= 1
        if budget[0] < 0:
            raise OverflowError("too many nodes")
        state = _state(node, fields)
        if state is None:
            raise TypeError("not a node")
        row = [encode_value(state.get("val"))]
        for f in fields[1:]:
            child = state.get(f)
            if child is None:
                row.append(-1)
                continue
            if kind_of(child) != kind:
                raise TypeError(f"{kind}.{f} is not a {kind}")
            at = index.get(id(child))
            if at is None:
                at = index[id(child)] = len(order)
                order.append(child)
            row.append(at)
        rows.append(row)
    return {"$n": [kind, rows]}


def decode(body, decode_value, classes) -> object:
    """The nodes of an encoded body, made of ``classes[kind]`` (without calling its
    ``__init__``: a program's ``TreeNode(x)`` takes other arguments than LeetCode's)."""
    if _type(body) is not list or len(body) != 2 or body[0] not in KINDS or _type(body[1]) is not list:
        raise ValueError("malformed node")
    kind, rows = body
    fields = KINDS[kind]
    cls = classes(kind)
    if not rows:
        raise ValueError("malformed node")
    nodes = []
    for row in rows:
        if _type(row) is not list or len(row) != len(fields):
            raise ValueError("malformed node")
        node = object.__new__(cls)
        nodes.append(node)
    for node, row in zip(nodes, rows):
        object.__setattr__(node, "val", decode_value(row[0]))
        for f, link in zip(fields[1:], row[1:]):
            if _type(link) is not int or not -1 <= link < len(nodes):
                raise ValueError("malformed node")
            object.__setattr__(node, f, None if link == -1 else nodes[link])
    return nodes[0]


HELPERS = ("from grpo_executor.nodes import ListNode, TreeNode, list_node, tree_node, is_same_list, is_same_tree\n")
"""A LeetCode task's ``helpers``: the judge's own builders and comparators."""
PRELUDE = "from grpo_executor.nodes import ListNode, TreeNode"
"""What a LeetCode task's prelude adds to the program's namespace."""
