"""The eval's files: append-only JSONL that survives a kill, atomic JSON, directory names."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from grpo_code.errors import GrpoCodeError


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of an append-only file. A torn last line (a run killed mid-write: no newline
    yet) is ignored; any other line that is not a JSON object means the file is damaged,
    and is named, not skipped."""
    if not path.is_file():
        return []
    out = []
    with path.open() as fh:
        for number, line in enumerate(fh, 1):
            if not line.endswith("\n"):
                break  # torn: only the last line can be
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise GrpoCodeError(f"{path}, line {number}: not a JSON record ({exc.msg})",
                                    "the file is damaged: fix or delete that line, or move the file away") from None
            if not isinstance(record, dict):
                raise GrpoCodeError(f"{path}, line {number}: not a JSON object",
                                    "the file is damaged: fix or delete that line, or move the file away")
            out.append(record)
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

