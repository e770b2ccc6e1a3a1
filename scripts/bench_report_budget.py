"""How long the costliest reports that are judged inline take (docs/sandbox.md, Judging budget).

A test's report up to ``budget.INLINE_BYTES`` is judged in the executor itself, without the
limited helper; this measures the worst values of that size we know of (items that all
hash alike, a Fraction of two large integers, a large integer against a Decimal, many empty
lists, deep nesting) against three expected values, in CPU time, in this process.

    python scripts/bench_report_budget.py [--size BYTES]
"""

from __future__ import annotations

import argparse
import json
import random
import time

from grpo_code.sandbox.executor import budget, verdict

P61 = 2**61 - 1


def cases(size: int) -> dict[str, str]:
    room = size - 100
    items, k = [], 1
    while len(",".join(items)) < room - 40:
        items.append(json.dumps({"$i": hex(5 + k * P61)}))
        k += 1
    digits = room // 2 - 40
    big = hex(random.getrandbits(digits * 4) | 1)[:digits]
    return {
        "set, items hash alike": '{"$s":[' + ",".join(items) + "]}",
        "dict keys hash alike": '{"$d":[' + ",".join(f"[{i},1]" for i in items[: len(items) * 4 // 5]) + "]}",
        "Fraction of big ints": json.dumps({"$k": ["Fraction", {"$i": big}, {"$i": big[:-1] + "3"}]}),
        "one big int": json.dumps({"$i": hex(random.getrandbits(room * 4))[: room - 20]}),
        "empty lists": "[" + ",".join(["[]"] * (room // 3)) + "]",
        "nested lists": "[" * 190 + "]" * 190,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=budget.INLINE_BYTES, help="report size in bytes")
    args = parser.parse_args()
    expected_values = {"1": 1, "Decimal": {"$k": ["Decimal", "1.5"]}, "set": {"$s": [1, 2]}}
    print(f"reports of at most {args.size} bytes, judged inline (CPU ms, compare=python)")
    worst = 0.0
    for name, value in cases(args.size).items():
        report = b'{"event":"started"}\n{"event":"returned","value":' + value.encode() + b"}\n"
        assert len(report) <= args.size, (name, len(report))
        row = []
        for label, expected in expected_values.items():
            test = {"kind": "call", "fn": "f", "args": [], "expected": expected, "compare": "python"}
            outcome = verdict.Outcome(test, status=0, report=report, started_marker=True)
            start = time.process_time()
            verdict.decide(outcome)
            ms = (time.process_time() - start) * 1000
            worst = max(worst, ms)
            row.append(f"{label} {ms:7.1f}")
        print(f"  {name:24s} " + "   ".join(row))
    print(f"worst: {worst:.1f} ms")


if __name__ == "__main__":
    main()
