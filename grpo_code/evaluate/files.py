"""The eval's files: append-only JSONL that survives a kill, atomic JSON, directory names."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of an append-only file; a torn last line (killed mid-write) is ignored."""
    if not path.is_file():
        return []
    out = []
    with path.open() as fh:
        for line in fh:
            if line.endswith("\n"):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    return out


class Appender:
    """Appends one JSON record a line, flushed; a torn last line of a killed run is dropped first."""

    def __init__(self, path: Path):
        if path.is_file() and path.stat().st_size:
            with path.open("rb") as fh:  # drop a torn last line so appends start on a fresh line
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":
                    data = path.read_bytes()
                    path.write_bytes(data[: data.rfind(b"\n") + 1])
        self.fh = path.open("a")

    def write(self, record: dict[str, Any]) -> None:
        self.fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".partial")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)


def slug(name: str) -> str:
    return re.sub(r"[^\w.-]+", "-", name.strip("/").replace("/", "--")).strip("-")[-100:] or "model"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]

