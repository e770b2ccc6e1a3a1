"""Typed loading of YAML into dataclasses, the machinery under :mod:`grpo_code.config`.

:func:`build` turns a mapping plus dotted ``key=value`` overrides into a dataclass,
collecting every problem (unknown key with the closest known one, wrong type, value out of
the bounds a field declares with :func:`bounds`) instead of stopping at the first;
:func:`read_yaml` and :func:`resolve_config_path` find and read the file. Nothing here
knows the run config's sections: those are the dataclasses in grpo_code/config.py.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import types
import typing
from pathlib import Path
from typing import Any, Literal, TypeVar, Union

import yaml

from grpo_code import resources
from grpo_code.errors import ConfigError, MissingFileError

T = TypeVar("T")

DEFAULT_CONFIG = "demo"
"""The bundled config used when none is given (``configs/demo.yaml``, found by grpo_code/resources.py)."""


def bounds(lo: float | None = None, hi: float | None = None) -> dict[str, float | None]:
    """Field metadata: the smallest and largest value the loader accepts (None: no bound)."""
    return {"min": lo, "max": hi}


def build(cls: type[T], data: dict[str, Any], overrides: list[str],
          moved: dict[str, str] | None = None) -> tuple[T, list[str]]:
    """``data`` with ``overrides`` (``a.b=value``) applied, as a ``cls``, and every problem found
    (the object is only meaningful when there are none). ``moved``: keys that are gone, with
    the key that now says the same thing."""
    nested, raw, problems = parse_overrides(overrides)
    loader = _Loader(raw, moved or {})
    loader.problems.extend(problems)
    return loader.build(cls, _merge(data, nested), ""), loader.problems


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    if origin is list:
        return f"a list of {_type_name(typing.get_args(tp)[0])}"
    if origin is dict:
        return "a mapping"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    return getattr(tp, "__name__", str(tp))


class _Loader:
    def __init__(self, raw_overrides: dict[str, str], moved: dict[str, str]):
        self.problems: list[str] = []
        self.raw = raw_overrides
        self.moved = moved

    def fail(self, key: str, value: Any, expected: str) -> None:
        self.problems.append(f"{key}: {value!r} is invalid (expected {expected})")

    def build(self, cls: type, data: Any, prefix: str) -> Any:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            self.fail(prefix or "<top level>", data, "a mapping")
            return cls()
        hints = typing.get_type_hints(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        for key in data:
            if key not in names:
                full = f"{prefix}.{key}" if prefix else str(key)
                if full in self.moved:
                    self.problems.append(f"{full}: said once now, as {self.moved[full]}")
                    continue
                close = difflib.get_close_matches(str(key), names, n=1)
                fix = f"did you mean {close[0]!r}?" if close else "valid keys: " + ", ".join(names)
                self.problems.append(f"{full}: unknown key ({fix})")
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name not in data:
                continue
            full = f"{prefix}.{f.name}" if prefix else f.name
            value = self.coerce(data[f.name], hints[f.name], full)
            if value is _BAD:
                continue
            lo, hi = f.metadata.get("min"), f.metadata.get("max")
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                if lo is not None and value < lo:
                    self.problems.append(f"{full}: {value!r} is too small (must be >= {lo})")
                    continue
                if hi is not None and value > hi:
                    self.problems.append(f"{full}: {value!r} is too large (must be <= {hi})")
                    continue
            kwargs[f.name] = value
        return cls(**kwargs)

    def coerce(self, value: Any, tp: Any, key: str) -> Any:
        origin = typing.get_origin(tp)
        if tp is Any:
            return value
        if origin in (Union, types.UnionType):
            args = typing.get_args(tp)
            if value is None and type(None) in args:
                return None
            others = [a for a in args if a is not type(None)]
            if len(others) == 1:
                out = self.coerce(value, others[0], key)
                if out is _BAD and self.problems and type(None) in args:
                    self.problems[-1] = self.problems[-1][:-1] + " or null)"
                return out
            self.fail(key, value, _type_name(tp))
            return _BAD
        if origin is Literal:
            if value in typing.get_args(tp):
                return value
            self.fail(key, value, _type_name(tp))
            return _BAD
        if dataclasses.is_dataclass(tp):
            return self.build(tp, value, key)
        if tp is bool:
            if isinstance(value, bool):
                return value
        elif tp is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        elif tp is float:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
        elif tp is str:
            if isinstance(value, str):
                return value
            if key in self.raw:  # `name=123` on the command line means the string "123"
                return self.raw[key]
        elif origin is list:
            (item_tp,) = typing.get_args(tp)
            if isinstance(value, str) and key in self.raw:
                value = [yaml.safe_load(v) if item_tp is not str else v for v in value.split(",") if v]
            if isinstance(value, list):
                items = [self.coerce(v, item_tp, f"{key}[{i}]") for i, v in enumerate(value)]
                return _BAD if any(i is _BAD for i in items) else items
        elif origin is dict:
            if isinstance(value, dict):
                key_tp, item_tp = typing.get_args(tp) or (Any, Any)
                out = {}
                for k, v in value.items():
                    # `a.b.3=2` on the command line names key "3"; a dict[int, ...] means 3.
                    if key_tp is int and isinstance(k, str) and k.strip().lstrip("-").isdigit():
                        k = int(k)
                    ck = self.coerce(k, key_tp, f"{key}.{k}")
                    cv = self.coerce(v, item_tp, f"{key}.{k}")
                    if ck is _BAD or cv is _BAD:
                        return _BAD
                    out[ck] = cv
                return out
        self.fail(key, value, _type_name(tp))
        return _BAD


_BAD = object()


def is_override(arg: str | os.PathLike[str]) -> bool:
    """Whether a command-line argument is a dotted ``key=value`` override: it holds ``=`` and
    names no existing path. Commands take overrides positionally, beside a config or models."""
    return "=" in str(arg) and not Path(arg).exists()


def parse_overrides(overrides: list[str]) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """Turn ``a.b=value`` strings into a nested dict (values parsed as YAML scalars)."""
    nested: dict[str, Any] = {}
    raw: dict[str, str] = {}
    problems = []
    for item in overrides:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            problems.append(f"{item!r}: not an override (write key.sub=value, e.g. sandbox.workers=4)")
            continue
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            value = text
        if isinstance(value, str):
            value = _number(value)
        raw[key] = text
        node = nested
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[parts[-1]] = value
    return nested, raw, problems


def _number(text: str) -> Any:
    """YAML 1.1 reads ``1e-5`` as a string; on the command line it means the float."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text) if text.strip().lower() not in ("nan", "inf", "-inf", "infinity") else text
    except ValueError:
        return text


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def read_yaml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a config file into a mapping, with user-facing errors for the usual mistakes."""
    p = Path(path)
    if not p.is_file():
        raise MissingFileError(f"config file {str(p)!r} not found", "check the path")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        reason = getattr(exc, "problem", None) or "syntax error"
        raise ConfigError([f"invalid YAML{where}: {reason}"], str(p)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError([f"top level is {type(data).__name__}, expected a mapping of sections"], str(p))
    return data


def resolve_config_path(path: str | os.PathLike[str] | None) -> Path:
    """The file a config argument names: ``path`` itself when it is a file, else a bundled
    config of that name (``demo``, ``qwen-coder-1.5b-vllm.yaml``); ``None`` is the bundled demo.
    Anything else is an error naming every place looked in (never a silent default)."""
    if path is None:
        return resources.config(DEFAULT_CONFIG)
    p = Path(path).expanduser()
    if p.is_file():
        return p
    looked = [p.absolute()]
    if len(p.parts) == 1:
        for bundled in resources.config_candidates(p.name):
            if bundled.is_file():
                return bundled
            looked.append(bundled)
    try:
        known = resources.config_names()
    except MissingFileError:
        known = []
    fix = f"check the path, or name a bundled config: {', '.join(known)}" if known else "check the path"
    raise MissingFileError(f"config file {str(path)!r} not found (looked in {', '.join(map(str, looked))})", fix)
