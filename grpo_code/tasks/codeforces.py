"""Codeforces problems in open-r1's shape (``grpo-code tasks convert codeforces``).

Records: ``id`` (``1234/A``), ``title``, ``description``, ``input_format``, ``output_format``,
``interaction_format``, ``note``, ``examples`` and ``official_tests`` (lists of ``{input,
output}``), ``official_tests_complete``, ``time_limit`` (seconds), ``memory_limit`` (MB),
``input_mode`` (``stdio`` or ``file``), ``generated_checker`` (a testlib checker's C++
source, for problems with several right answers), ``executable``, ``rating``, ``tags``,
and for interactive problems ``interactor`` (its source).

Each becomes an ``instruct`` task with the statement as Codeforces shows it, the official
tests (the examples where there are none) as ``io`` tests, and the problem's limits. A
problem with a checker is judged by it when the conversion is given testlib.h
(``testlib=True``; ``tasks convert codeforces --testlib PATH`` puts the header in the
suite's ``include/``): the checker's source becomes the task's C++ checker ``checker``
(docs/tasks.md, C++ checkers), compiled once where the tests run. Without it such a problem
is judged by exact comparison and marked ``metadata.needs_checker`` (a right answer other
than the dataset's may fail). An interactive problem takes its interactor: C++ (testlib's,
as open-r1 ships them; needs testlib.h as checkers do, else the record is unreadable and
says so) or Python (``test_input`` the test's input; docs/sandbox.md, Interactive tests).
Problems read from files and those open-r1 marks not executable are unreadable.

open-r1 keeps most tests apart, in ``generated_tests/test_cases_<contest>.parquet`` shards
(``problem_id``, ``input``, ``output``, ``test_i``): given their folder (``generated``;
``--generated-tests DIR``), a problem's generated tests follow its official ones (an input
already among them is not repeated).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grpo_code.errors import SuiteError
from grpo_code.tasks.records import STDIN_INSTRUCTION, Record, RecordError, convert_each, first_key, io_test
from grpo_code.tasks.rl_sets import _limits


def _pairs(value: Any, where: str) -> list[tuple[str, str]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordError(where, f"is {type(value).__name__}, expected a list of {{input, output}}")
    out = []
    for j, t in enumerate(value):
        if not (isinstance(t, dict) and isinstance(t.get("input"), str) and isinstance(t.get("output"), str)):
            raise RecordError(f"{where}[{j}]", "expected {input: str, output: str}")
        out.append((t["input"], t["output"]))
    return out


def _statement(r: Record, examples: list[tuple[str, str]]) -> str:
    parts = [f"{r.get('title') or r.get('id')}", str(r.get("description") or "").strip()]
    for key, head in (("input_format", "Input"), ("output_format", "Output"), ("interaction_format", "Interaction")):
        if isinstance(r.get(key), str) and r[key].strip():
            parts.append(f"{head}\n{r[key].strip()}")
    for k, (given, wanted) in enumerate(examples, 1):
        parts.append(f"Example {k}\nInput:\n{given.rstrip()}\nOutput:\n{wanted.rstrip()}")
    if isinstance(r.get("note"), str) and r["note"].strip():
        parts.append(f"Note\n{r['note'].strip()}")
    return "\n\n".join(p for p in parts if p)


def _is_cpp(source: str) -> bool:
    return "#include" in source or "int main" in source


def _contest(r: Record) -> str | None:
    found = r.get("contest_id") or str(r.get("id") or "").split("/")[0]
    return str(found) if str(found).isdigit() else None


def generated_tests(folder: Path, records: list[Record]) -> dict[str, list[tuple[str, str]]]:
    """open-r1's generated tests of ``records``' problems, by problem id, in their order
    (``test_i``): ``folder`` holds its ``test_cases_<contest>.parquet`` shards (contest ids
    padded to four digits, as the dataset names them), directly or under
    ``generated_tests/``; only the shards of the records' contests are read, and of those
    only the rows of their problems. A contest without a shard gives its problems none."""
    if (folder / "generated_tests").is_dir():
        folder = folder / "generated_tests"
    wanted: dict[str, set[str]] = {}
    for r in records:
        contest = _contest(r) if isinstance(r, dict) else None
        if contest is not None and r.get("id"):
            wanted.setdefault(contest, set()).add(str(r["id"]))
    found: dict[str, list[tuple[int, str, str]]] = {}
    for contest, ids in wanted.items():
        shard = folder / f"test_cases_{int(contest):04d}.parquet"
        if shard.is_file():
            _shard_rows(shard, ids, found)
    return {pid: [(given, wanted) for _, given, wanted in sorted(rows, key=lambda t: t[0])]
            for pid, rows in found.items()}


MAX_GENERATED_MB = 256
"""The largest generated test (input and output together) read from a shard, in MiB."""


def _shard_rows(shard: Path, ids: set[str], found: dict[str, list[tuple[int, str, str]]]) -> None:
    """The rows of ``ids``' problems in one shard, into ``found``. The problem ids are read
    first (whether or not the shard has statistics); then only the row groups that hold one
    of them, a row at a time, and a row of another problem is never turned into Python
    strings. Parquet decodes a column a row group at a time, so a row group that holds a
    wanted problem costs about four times its largest test while it is read (docs/tasks.md,
    Hostile and oversized input)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(shard)
        names = set(table.schema_arrow.names)
        if not {"problem_id", "input", "output"} <= names:
            raise SuiteError(f"{shard}: no problem_id, input and output columns",
                             "is this a shard of open-r1's codeforces generated tests?")
        columns = ["problem_id", "input", "output"] + (["test_i"] if "test_i" in names else [])
        groups = [g for g in range(table.num_row_groups)
                  if pc.any(pc.is_in(table.read_row_group(g, columns=["problem_id"]).column(0),
                                     value_set=pa.array(sorted(ids)))).as_py()]
        for group in groups:
            for batch in table.iter_batches(batch_size=1, row_groups=[group], columns=columns):
                pid = batch.column(0)[0].as_py()
                if pid not in ids:
                    continue
                given, wanted = batch.column(1)[0], batch.column(2)[0]
                size = sum(len(v.as_buffer() or b"") if isinstance(v, pa.StringScalar) and v.is_valid else 0
                           for v in (given, wanted))
                if size > MAX_GENERATED_MB << 20:
                    raise SuiteError(f"{shard}: a generated test of {pid} over {MAX_GENERATED_MB} MiB",
                                     "leave out --generated-tests, or this problem")
                given, wanted = given.as_py(), wanted.as_py()
                if not (isinstance(given, str) and isinstance(wanted, str)):
                    continue
                index = batch.column(3)[0].as_py() if "test_i" in columns else 0
                try:
                    index = int(index or 0)
                except (TypeError, ValueError):
                    raise SuiteError(f"{shard}: test_i {str(index)[:40]!r} of {pid} is not an integer",
                                     "check the shard (test_i numbers each problem's tests)") from None
                found.setdefault(pid, []).append((index, given, wanted))
    except (pa.ArrowException, OSError) as exc:
        raise SuiteError(f"{shard}: not a readable parquet file ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})",
                         "check the shard (a truncated or corrupt download?)") from None


def codeforces(records: list[Record], source: str = "codeforces", split: str | None = None,
               testlib: bool = False, generated: Path | None = None) -> list[Record]:
    """open-r1's Codeforces problems (see the module's docstring)."""
    extra = generated_tests(generated, records) if generated is not None else {}

    def one(r: Record, i: int, where: str) -> Record:
        if not isinstance(r.get("description"), str) or not r["description"].strip():
            raise RecordError(f"{where}: description", "missing or empty (the problem statement)")
        if r.get("executable") is False:
            raise RecordError(f"{where}: executable", "false: open-r1 could not run this problem's tests",
                              "remove the record")
        if r.get("input_mode") not in (None, "stdio"):
            raise RecordError(f"{where}: input_mode", f"{r['input_mode']!r}: the program reads files, which the "
                              "sandbox's io tests do not give it", "remove the record")
        examples = _pairs(r.get("examples"), f"{where}: examples")
        official = _pairs(r.get("official_tests"), f"{where}: official_tests")
        pairs = official or examples
        seen = {given for given, _ in pairs}
        pairs = pairs + [(given, wanted) for given, wanted in extra.get(str(r.get("id")), ())
                         if not (given in seen or seen.add(given))]
        if not pairs:
            raise RecordError(f"{where}: official_tests", "no tests (and no examples)", "remove the record")
        meta: Record = {"source": "codeforces", "split": split or "train",
                        **{k: r[k] for k in ("rating", "tags", "contest_id", "index") if r.get(k) not in (None, [])}}
        task: Record = {"id": f"cf/{r.get('id') or i}", "prompt": f"{_statement(r, examples)}\n\n{STDIN_INSTRUCTION}",
                        "language": "python", "mode": "instruct", "metadata": meta}
        interactive = isinstance(r.get("interaction_format"), str) and r["interaction_format"].strip()
        if interactive:
            source = r.get("interactor")
            if not isinstance(source, str) or not source.strip():
                raise RecordError(f"{where}: interactor", "an interactive problem without its interactor")
            if _is_cpp(source) and not testlib:
                raise RecordError(f"{where}: interactor", "a C++ (testlib) interactor, which needs testlib.h",
                                  "convert with --testlib PATH")
            task["interactors"] = {"interactor": {"language": "cpp", "source": source} if _is_cpp(source) else source}
            task["tests"] = [{"kind": "io", "stdin": given, "interactor": "interactor"} for given, _ in pairs]
        else:
            task["tests"] = [io_test(given, wanted) for given, wanted in pairs]
            task["public_tests"] = [io_test(given, wanted) for given, wanted in examples]
        limits = _limits(r.get("time_limit"), r.get("memory_limit"), where)
        if limits:
            task["limits"] = limits
        checker = r.get("generated_checker")
        if isinstance(checker, str) and checker.strip() and not interactive:
            if testlib:
                task["checkers"] = {"checker": {"language": "cpp", "source": checker}}
                task["tests"] = [{**t, "checker": "checker"} for t in task["tests"]]
            else:
                meta["needs_checker"] = True  # exact comparison may fail a right answer: see the module's docstring
        if r.get("official_tests_complete") is False:
            meta["official_tests_complete"] = False
        return task

    return convert_each(records, source, one, first_key("id"))
