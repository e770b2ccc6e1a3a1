"""Peak memory of a command and every process it starts: each process's peak RSS (the
kernel's ``VmHWM``), summed, and the most the whole tree held at one moment.

    .venv/bin/python scripts/peak_memory.py [--json] [--interval 0.2] -- grpo-code train

The tree is read from ``/proc`` every ``--interval`` seconds; a process's ``VmHWM`` is its
peak since it started, so a peak between two reads is not missed, only a process that
lives shorter than one interval. Sandbox containers are started by the Docker engine, not
by the command, so they are not in the tree: their memory is bounded by
``sandbox.memory_mb`` each and shown by ``docker stats``. Prints a table of processes by
peak and the two totals; the command's own output goes to ``--log`` (default: discarded),
so the table is what is left on the screen.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

KIB = 1024


def _status(pid: int) -> dict[str, str]:
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            out[key] = value.strip()
    except OSError:
        return {}
    return out


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def _tree(root: int) -> list[int]:
    kids = _children()
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


def _name(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    words = [a.decode(errors="replace") for a in argv if a]
    if not words:
        return "?"
    shown = [Path(words[0]).name, *words[1:3]]
    return " ".join(shown)[:60]


def measure(argv: list[str], interval: float, log: Path | None) -> dict:
    out = open(log, "wb") if log else subprocess.DEVNULL
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    peaks: dict[int, tuple[str, int]] = {}
    together = 0
    while True:
        total = 0
        for pid in _tree(proc.pid):
            status = _status(pid)
            if "VmHWM" not in status:
                continue
            hwm = int(status["VmHWM"].split()[0]) * KIB
            total += int(status["VmRSS"].split()[0]) * KIB
            name = peaks.get(pid, (None, 0))[0] or _name(pid)
            peaks[pid] = (name, max(hwm, peaks.get(pid, ("", 0))[1]))
        together = max(together, total)
        if proc.poll() is not None:
            break
        time.sleep(interval)
    return {"command": argv, "exit_code": proc.returncode, "wall_s": time.perf_counter() - started,
            "sum_of_peaks_bytes": sum(p for _, p in peaks.values()), "peak_together_bytes": together,
            "processes": sorted(([n, p] for n, p in peaks.values()), key=lambda np: -np[1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument("--log", type=Path, help="where the command's output goes")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    argv = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not argv:
        parser.error("give the command after --, e.g. -- grpo-code train")
    report = measure(argv, args.interval, args.log)
    if args.json:
        print(json.dumps(report))
    else:
        gib = 1 << 30
        for name, peak in report["processes"][:12]:
            print(f"{peak / gib:8.2f} GiB  {name}")
        print(f"sum of per-process peaks {report['sum_of_peaks_bytes'] / gib:.2f} GiB; most held at once "
              f"{report['peak_together_bytes'] / gib:.2f} GiB; {report['wall_s']:.0f} s; exit {report['exit_code']}")
    sys.exit(report["exit_code"])


if __name__ == "__main__":
    main()
