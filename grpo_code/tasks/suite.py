"""Suites: named sets of tasks that training and eval consume.

A suite is referenced by

- a bundled name (``demo`` -> ``tasks/demo/``, found by grpo_code/resources.py in the wheel or
  the checkout) or a name found in ``tasks.paths``,
- a path to a suite directory (``suite.yaml`` + ``tasks.jsonl``),
- ``FORMAT:PATH``, a public-format file read through an adapter (``humaneval:HumanEval.jsonl.gz``),
- ``package.module:function``, a Python callable returning tasks (or task records).

Splits: a task's ``metadata.split`` names its split; a split may also be an id range
``A-B`` over the number in the task ids (MBPP's customary 11-510 test range), or ``all``.

A suite converted with ``tasks convert --skip-invalid`` lists the records it left out in
``suite.yaml`` (``skipped:``, each with ``index``, ``id``, ``field``, ``reason``), read back
as :attr:`Suite.skipped`.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from grpo_code import resources
from grpo_code.errors import SuiteError
from grpo_code.sandbox.types import Limits, LimitsError
from grpo_code.tasks.adapters import ADAPTERS, convert
from grpo_code.tasks.records import Conversion, Unreadable
from grpo_code.tasks.schema import MODES, Task, task_from_dict

SUITE_KEYS = ("name", "description", "language", "mode", "limits", "system_prompt", "prompt_template",
              "source", "license", "skipped")
SKIPPED_KEYS = ("index", "id", "field", "reason")


@dataclass(frozen=True)
class Suite:
    name: str
    tasks: tuple[Task, ...]
    description: str = ""
    language: str = "python"
    mode: str = "instruct"
    limits: Limits = field(default_factory=Limits)
    system_prompt: str | None = None
    prompt_template: str | None = None
    source: str | None = None
    license: str | None = None
    path: str | None = None
    skipped: tuple[Unreadable, ...] = ()  # records left out when the suite was converted

    def __len__(self) -> int:
        return len(self.tasks)

    def get(self, task_id: str) -> Task:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise SuiteError(f"suite {self.name!r} has no task {task_id!r}",
                         f"`grpo-code tasks show {self.name}` lists its ids")

    @property
    def splits(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for task in self.tasks:
            key = task.split or "(none)"
            counts[key] = counts.get(key, 0) + 1
        return counts

    def split(self, name: str | None) -> Suite:
        """The tasks of one split (a ``metadata.split`` name, an id range ``A-B`` or ``all``)."""
        if name in (None, "", "all"):
            return self
        range_match = re.fullmatch(r"(\d+)-(\d+)", name)
        if range_match:
            lo, hi = int(range_match.group(1)), int(range_match.group(2))
            chosen = [t for t in self.tasks if (n := _id_number(t.id)) is not None and lo <= n <= hi]
        else:
            chosen = [t for t in self.tasks if t.split == name]
        if not chosen:
            known = ", ".join(sorted(k for k in self.splits if k != "(none)")) or "none"
            raise SuiteError(f"suite {self.name!r} has no tasks in split {name!r} (its splits: {known})",
                             "pick one of its splits, an id range like 11-510, or all")
        return replace(self, tasks=tuple(chosen))

    def content_hash(self) -> str:
        """A hash of the task contents, stored with results so numbers name their task set."""
        digest = hashlib.sha256()
        for task in sorted(self.tasks, key=lambda t: t.id):
            digest.update(task.content_hash().encode())
        return digest.hexdigest()[:16]


def _id_number(task_id: str) -> int | None:
    numbers = re.findall(r"\d+", task_id)
    return int(numbers[-1]) if numbers else None


def _read_suite_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise SuiteError(f"{path}{line}: invalid YAML", "fix the syntax of suite.yaml") from None
    if not isinstance(data, dict):
        raise SuiteError(f"{path}: expected a mapping", "see docs/tasks.md for suite.yaml keys")
    unknown = sorted(set(data) - set(SUITE_KEYS))
    if unknown:
        raise SuiteError(f"{path}: {unknown[0]}: unknown key (known: {', '.join(SUITE_KEYS)})",
                         "see docs/tasks.md for suite.yaml keys")
    if data.get("mode", "instruct") not in MODES:
        raise SuiteError(f"{path}: mode: {data['mode']!r} is invalid", "use complete or instruct")
    return data


def _skipped(data: Any, where: str) -> tuple[Unreadable, ...]:
    """``suite.yaml``'s ``skipped:``: the records a conversion left out."""
    hint = "each entry of skipped is {index, id, field, reason}, as `grpo-code tasks convert --skip-invalid` writes"
    if data is None:
        return ()
    if not isinstance(data, list):
        raise SuiteError(f"{where}: skipped: is {type(data).__name__}, expected a list", hint)
    out = []
    for j, entry in enumerate(data):
        at = f"{where}: skipped[{j}]"
        if not isinstance(entry, dict):
            raise SuiteError(f"{at}: is {type(entry).__name__}, expected a mapping", hint)
        unknown = sorted(set(entry) - set(SKIPPED_KEYS), key=str)
        if unknown:
            raise SuiteError(f"{at}.{unknown[0]}: unknown key (known: {', '.join(SKIPPED_KEYS)})", hint)
        index, ident = entry.get("index"), entry.get("id")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise SuiteError(f"{at}.index: {index!r} is not a record number", hint)
        if ident is not None and (isinstance(ident, bool) or not isinstance(ident, (str, int))):
            raise SuiteError(f"{at}.id: {ident!r} is not a record id", hint)
        for key in ("field", "reason"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                raise SuiteError(f"{at}.{key}: {entry.get(key)!r} is not a non-empty string", hint)
        out.append(Unreadable(index, None if ident is None else str(ident), entry["field"], entry["reason"]))
    return tuple(out)


def _limits(data: Any, where: str) -> Limits:
    try:
        return Limits.from_dict(data)
    except LimitsError as exc:
        raise SuiteError(f"{where}: {exc.field}: {exc.problem}", "see docs/tasks.md") from None


INCLUDE_DIR = "include"
"""A suite directory's headers for its C++ checkers (testlib.h), docs/tasks.md."""


def include_headers(path: Path) -> dict[str, str]:
    """The files of ``path/include`` by name (none: an empty dict)."""
    folder = path / INCLUDE_DIR
    if not folder.is_dir():
        return {}
    return {p.name: p.read_text(errors="replace") for p in sorted(folder.iterdir())
            if p.is_file() and not p.name.startswith(".")}


def load_suite_dir(path: Path) -> Suite:
    """Load ``suite.yaml`` + ``tasks.jsonl`` from a directory, validating every line."""
    meta_path, tasks_path = path / "suite.yaml", path / "tasks.jsonl"
    if not tasks_path.is_file():
        raise SuiteError(f"{path} is not a suite: no tasks.jsonl", "a suite directory holds suite.yaml and tasks.jsonl")
    meta = _read_suite_yaml(meta_path) if meta_path.is_file() else {}
    limits = _limits(meta.get("limits"), str(meta_path))
    language = meta.get("language", "python")
    mode = meta.get("mode", "instruct")
    tasks = []
    seen: dict[str, int] = {}
    headers = include_headers(path)
    with tasks_path.open() as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{tasks_path}:{lineno}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SuiteError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})",
                                 "each line of tasks.jsonl is one JSON object") from None
            except ValueError as exc:  # an integer past Python's 4300-digit limit
                raise SuiteError(f"{where}: {exc}".split(";")[0],
                                 'write large integers as {"$i": "0x..."} (docs/sandbox.md, Values)') from None
            except RecursionError:
                raise SuiteError(f"{where}: JSON nested too deeply to read", "fix or remove the task") from None
            task = task_from_dict(record, where, language, mode, limits, headers)
            if task.id in seen:
                raise SuiteError(f"{where}: id: {task.id!r} already used on line {seen[task.id]}", "ids must be unique")
            seen[task.id] = lineno
            tasks.append(task)
    if not tasks:
        raise SuiteError(f"{tasks_path} holds no tasks", "add one JSON task per line")
    return Suite(
        name=str(meta.get("name") or path.name),
        tasks=tuple(tasks),
        description=str(meta.get("description") or ""),
        language=language,
        mode=mode,
        limits=limits,
        system_prompt=meta.get("system_prompt"),
        prompt_template=meta.get("prompt_template"),
        source=meta.get("source"),
        license=meta.get("license"),
        path=str(path),
        skipped=_skipped(meta.get("skipped"), str(meta_path)),
    )


def suite_from_records(name: str, records: Iterable[Any], where: str, **meta: Any) -> Suite:
    """Validate task records (dicts or Tasks) produced by an adapter or a user callable;
    ``where`` names the input in errors."""
    tasks = []
    seen = set()
    for i, record in enumerate(records):
        task = record if isinstance(record, Task) else task_from_dict(record, f"{where}[{i}]")
        if task.id in seen:
            raise SuiteError(f"{where}[{i}]: id: {task.id!r} is duplicated", "ids must be unique")
        seen.add(task.id)
        tasks.append(task)
    if not tasks:
        raise SuiteError(f"{where} produced no tasks", "check the input file or callable")
    return Suite(name=name, tasks=tuple(tasks), language=tasks[0].language, mode=tasks[0].mode, path=where, **meta)


def converted_tasks(conversion: Conversion, source: str) -> tuple[list[Task], list[Unreadable]]:
    """The tasks of a conversion, validated as a suite validates them, and every record
    that did not make one: those the adapter could not read, those whose task is invalid,
    and those whose id an earlier record already has (sorted by record)."""
    tasks: list[Task] = []
    skipped = list(conversion.skipped)
    seen: dict[str, int] = {}
    for record, index in zip(conversion.tasks, conversion.indices, strict=True):
        rid = None if record.get("id") is None else str(record["id"])
        where = f"{source}[{index}]"
        try:
            task = task_from_dict(record, where)
        except SuiteError as exc:
            skipped.append(Unreadable(index, rid, "(converted task)", exc.what.removeprefix(f"{where}: "), exc.hint))
            continue
        if task.id in seen:
            skipped.append(Unreadable(index, task.id, "id", f"{task.id!r} is also the id of record {seen[task.id]}",
                                      "ids must be unique"))
            continue
        seen[task.id] = index
        tasks.append(task)
    return tasks, sorted(skipped, key=lambda p: p.index)


def _search_paths(extra: Iterable[str] = ()) -> list[Path]:
    """The configured paths, then the bundled suites (an error naming where it looked when
    the bundled ones are missing: a broken install is never an empty list)."""
    return [Path(p).expanduser() for p in extra] + [resources.bundled_dir("tasks")]


def list_suites(extra_paths: Iterable[str] = ()) -> list[Path]:
    """Suite directories found in the configured paths and the bundled ``tasks/``."""
    found = []
    for root in _search_paths(extra_paths):
        if root.is_dir():
            found.extend(sorted(p for p in root.iterdir() if (p / "tasks.jsonl").is_file()))
    return found


def load_suite(ref: str, extra_paths: Iterable[str] = ()) -> Suite:
    """Load a suite by bundled name, path, ``FORMAT:PATH`` or ``package.module:function``."""
    path = Path(ref).expanduser()
    if path.is_dir():
        return load_suite_dir(path)
    if path.is_file():
        if path.name == "tasks.jsonl":
            return load_suite_dir(path.parent)
        raise SuiteError(f"{ref} is a file, not a suite",
                         f"convert it with `grpo-code tasks convert FORMAT {ref} DIR` or use FORMAT:{ref}")
    fmt, sep, rest = ref.partition(":")
    if sep and fmt in ADAPTERS:
        return _from_format(fmt, rest)
    if sep and re.fullmatch(r"[A-Za-z_][\w.]*", fmt) and rest.isidentifier():
        return _from_callable(fmt, rest, ref)
    roots = _search_paths(extra_paths)
    for root in roots:
        if (root / ref / "tasks.jsonl").is_file():
            return load_suite_dir(root / ref)
    names = ", ".join(p.name for p in list_suites(extra_paths)) or "none"
    raise SuiteError(
        f"unknown suite {ref!r} (bundled/configured: {names}; looked in {', '.join(map(str, roots))})",
        "give a suite name, a suite directory, FORMAT:PATH (formats: " + ", ".join(ADAPTERS)
        + ") or package.module:function",
    )


def _from_format(fmt: str, src: str) -> Suite:
    """A suite straight from a public-format file (``FORMAT:PATH`` suite references)."""
    records = convert(fmt, src)
    return suite_from_records(f"{fmt}:{Path(src).name}", records, src, source=src)


def _from_callable(module_name: str, attr: str, ref: str) -> Suite:
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SuiteError(f"cannot import {module_name!r} for suite {ref!r} ({exc})",
                         "install the package or fix the module path") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise SuiteError(f"{module_name} has no callable {attr!r}", "the adapter must be a function returning tasks")
    out = fn()
    if isinstance(out, Suite):
        return out
    return suite_from_records(attr, out, ref)


def write_suite(suite: Suite, dest: Path, extra_meta: dict[str, Any] | None = None) -> Path:
    """Write a suite directory (``suite.yaml`` + ``tasks.jsonl``) that ``load_suite`` reads back."""
    dest.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {"name": suite.name, "description": suite.description, "language": suite.language,
                            "mode": suite.mode}
    if suite.limits.to_dict():
        meta["limits"] = suite.limits.to_dict()
    for key in ("system_prompt", "prompt_template", "source", "license"):
        if getattr(suite, key):
            meta[key] = getattr(suite, key)
    if suite.skipped:
        meta["skipped"] = [p.to_dict() for p in suite.skipped]
    meta.update(extra_meta or {})
    (dest / "suite.yaml").write_text(yaml.safe_dump(meta, sort_keys=False, allow_unicode=True))
    tmp = dest / "tasks.jsonl.partial"
    with tmp.open("w") as fh:
        for task in suite.tasks:
            # Streamed: a task of a gigabyte of tests is never held as one more string.
            json.dump(task.to_dict(), fh, ensure_ascii=False)
            fh.write("\n")
    tmp.rename(dest / "tasks.jsonl")
    return dest
