"""``grpo-code tasks``: list, show, convert and check task suites.

``list``, ``show`` and ``check`` read a run config (``--config``, default demo, plus
positional ``key=value`` overrides): its ``tasks.paths`` are searched for suites by name,
and ``check`` runs under its ``sandbox`` section.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from grpo_code.cli.common import OverridesArg, command, split_overrides

if TYPE_CHECKING:
    from grpo_code.config import RunConfig

app = typer.Typer(name="tasks", help="List, inspect, convert and check task suites.", no_args_is_help=True,
                  add_completion=False)

SuiteArg = Annotated[str, typer.Argument(help="Suite: bundled name, directory, FORMAT:PATH or package.module:function.")]


def _config(config: Path | None, overrides: list[str] | None) -> RunConfig:
    from grpo_code.config import load_config

    return load_config(config, overrides or [])


ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", show_default=False,
    help="Run config (a YAML file or a bundled config's name; default: demo) whose tasks.paths are searched too.")]


@command(app, "list")
def list_(overrides: OverridesArg = None, config: ConfigOpt = None) -> None:
    """List bundled suites and those in the configured paths (skipped: records left out at conversion)."""
    from rich.console import Console
    from rich.table import Table

    from grpo_code.tasks.suite import list_suites, load_suite_dir

    table = Table("suite", "tasks", "skipped", "splits", "language", "description", title="task suites")
    for path in list_suites(_config(config, overrides).tasks.paths):
        suite = load_suite_dir(path)
        splits = ", ".join(f"{k} {v}" for k, v in sorted(suite.splits.items()))
        table.add_row(suite.name, str(len(suite)), str(len(suite.skipped)), splits, suite.language, suite.description)
    Console().print(table)


@command(app, "show")
def show(
    suite: SuiteArg,
    task_id: Annotated[str | None, typer.Argument(help="Show this task in full.", show_default=False)] = None,
    overrides: OverridesArg = None,
    split: Annotated[str | None, typer.Option(help="Only this split (name, id range A-B, or all).")] = None,
    style: Annotated[str, typer.Option(help="Prompt style shown for a task: chat or raw.")] = "chat",
    config: ConfigOpt = None,
) -> None:
    """Show a suite's tasks, or one task with its rendered prompt, tests and reference."""
    from rich.console import Console
    from rich.table import Table

    from grpo_code.tasks import load_suite, render

    # TASK_ID is optional, so the first override may have landed in it.
    ids, overrides = split_overrides([*([task_id] if task_id is not None else []), *(overrides or [])])
    task_id = ids[0] if ids else None
    console = Console()
    s = load_suite(suite, _config(config, overrides + ids[1:]).tasks.paths).split(split)
    if task_id is None:
        skipped = f"; {len(s.skipped)} records skipped at conversion (suite.yaml)" if s.skipped else ""
        table = Table("id", "split", "mode", "tests", "reference", "prompt",
                      title=f"{s.name}: {len(s)} tasks (hash {s.content_hash()}{skipped})")
        for t in s.tasks:
            first = t.prompt.strip().splitlines()[0][:60]
            table.add_row(t.id, t.split or "-", t.mode, str(len(t.tests)), "yes" if t.reference else "no", first)
        console.print(table)
        return
    task = s.get(task_id)
    prompt = render(task, style, s.system_prompt, s.prompt_template)
    console.rule(f"{task.id} ({task.language}, {task.mode}, split {task.split or '-'})")
    if prompt.style == "chat":
        for m in prompt.messages:
            console.print(f"[bold]{m['role']}[/bold]", highlight=False)
            console.print(m["content"], markup=False, highlight=False)
    else:
        console.print(prompt.text, markup=False, highlight=False)
    console.rule("tests")
    for t in task.tests:
        console.print(json.dumps(t.to_dict(), ensure_ascii=False)[:500], markup=False, highlight=False)
    if task.reference:
        console.rule("reference")
        console.print(task.reference, markup=False, highlight=False)


@command(app, "convert")
def convert(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help=(
        "humaneval, mbpp, stdio, call, codecontests, apps, evalplus, livecodebench, taco, primeintellect, "
        "deepcoder, kodcode, codeforces, or auto (told from the records' fields)."))],
    src: Annotated[str, typer.Argument(help="Input: .jsonl, .jsonl.gz, .json, .parquet or a hub dataset id.")],
    dst: Annotated[Path, typer.Argument(help="Suite directory to write (suite.yaml + tasks.jsonl).")],
    language: Annotated[str, typer.Option(help="Language of a HumanEval-style file.")] = "python",
    name: Annotated[str | None, typer.Option(help="Suite name (default: the directory name).")] = None,
    float_tol: Annotated[float | None, typer.Option(
        help="stdio, codecontests, apps: compare tokens with this float tolerance.")] = None,
    unwrap_outputs: Annotated[bool, typer.Option(help="call: expected values are one-element lists.")] = False,
    tests: Annotated[str | None, typer.Option(
        help="codecontests: test groups to keep, comma-separated (default public,private,generated); "
             "evalplus: base, plus or all (default).")] = None,
    split: Annotated[str | None, typer.Option(
        help="codecontests, apps, taco, codeforces: metadata.split of every task (apps default: test; taco, "
             "codeforces: train).")] = None,
    since: Annotated[str | None, typer.Option(
        help="livecodebench: keep contests from this day (YYYY-MM-DD, included).")] = None,
    until: Annotated[str | None, typer.Option(
        help="livecodebench: keep contests up to this day (YYYY-MM-DD, included).")] = None,
    testlib: Annotated[Path | None, typer.Option(
        help="codeforces: testlib.h, copied to DST/include/; problems with a checker are then judged by it "
             "instead of by exact comparison, and C++ interactors run (each compiled once where the tests run).")] = None,
    generated_tests: Annotated[Path | None, typer.Option(
        help="codeforces: the folder of open-r1's generated_tests/test_cases_<contest>.parquet shards; each "
             "problem's generated tests are added after its official ones.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing suite in DST.")] = False,
    skip_invalid: Annotated[bool, typer.Option(
        "--skip-invalid", help="Write the readable records' tasks and list the unreadable ones "
                               "(stderr and suite.yaml `skipped:`) instead of writing nothing.")] = False,
) -> None:
    """Convert a public benchmark file into a suite directory.

    Every record is read; those that cannot be (a missing or malformed field, an ambiguous
    input) are listed on stderr with their index, id, field and reason. Without
    --skip-invalid nothing is written and the command exits 2; with it the other records'
    tasks are written and suite.yaml lists the skipped ones.
    """
    from grpo_code.cli.common import eprint
    from grpo_code.errors import SuiteError
    from grpo_code.tasks import adapters
    from grpo_code.tasks.suite import converted_tasks, suite_from_records, write_suite

    if (dst / "tasks.jsonl").exists() and not force:
        raise SuiteError(f"{dst} already holds a suite", "pass --force to overwrite or choose another directory")
    records = None
    if fmt == "auto":  # read once here: the format decides the options below
        records = adapters.read_records(src)
        fmt = adapters.detect_format(records)
        typer.echo(f"format: {fmt} (told from the records' fields)")
    options: dict = {}
    if since is not None or until is not None:
        if fmt != "livecodebench":
            raise SuiteError(f"--since/--until do not apply to {fmt}", "they set livecodebench's contest window")
        options.update(since=since, until=until)
    if fmt == "humaneval":
        options["language"] = language
    elif fmt == "stdio" and float_tol is not None:
        options["float_tol"] = float_tol
    elif fmt == "call":
        options["unwrap_outputs"] = unwrap_outputs
    if fmt in ("codecontests", "apps"):
        options.update({k: v for k, v in (("float_tol", float_tol), ("split", split)) if v is not None})
    elif fmt in ("taco", "codeforces") and split is not None:
        options["split"] = split
    elif split is not None:
        raise SuiteError(f"--split does not apply to {fmt}", "it sets the split of codecontests, apps, taco and codeforces tasks")
    if testlib is not None:
        if fmt != "codeforces":
            raise SuiteError(f"--testlib does not apply to {fmt}",
                             "it gives codeforces problems their C++ checkers and interactors")
        if not testlib.is_file():
            raise SuiteError(f"--testlib {testlib}: no such file", "give the path of testlib.h (datasets ship it)")
        options["testlib"] = True
    if generated_tests is not None:
        if fmt != "codeforces":
            raise SuiteError(f"--generated-tests does not apply to {fmt}", "it adds open-r1's generated tests to "
                             "codeforces problems")
        if not generated_tests.is_dir():
            raise SuiteError(f"--generated-tests {generated_tests}: not a folder",
                             "give the folder holding open-r1's test_cases_<contest>.parquet shards")
        options["generated"] = generated_tests
    if tests is not None:
        if fmt not in ("codecontests", "evalplus"):
            raise SuiteError(f"--tests does not apply to {fmt}",
                             "it selects the test groups of codecontests (public,private,generated) and evalplus "
                             "(base, plus or all)")
        options["tests"] = tests
    conversion = adapters.convert_all(fmt, src, records, **options)
    tasks, skipped = converted_tasks(conversion, Path(src).name)
    if skipped:
        eprint(f"{len(skipped)} of {conversion.total} records cannot be read:")
        for problem in skipped:
            eprint(f"  record {problem.index} (id {problem.id if problem.id is not None else '-'}), "
                   f"{problem.field}: {problem.reason}")
    if not tasks:
        raise SuiteError(f"none of the {conversion.total} records of {src} can be read (listed above)",
                         f"is it a {fmt} file? docs/tasks.md, Converting public benchmarks")
    if skipped and not skip_invalid:
        raise SuiteError(f"{len(skipped)} of {conversion.total} records of {src} cannot be read (listed above); "
                         "nothing was written", f"fix or remove them, or pass --skip-invalid to write the "
                         f"{len(tasks)} readable task{'s' if len(tasks) > 1 else ''} and list the skipped "
                         "records in suite.yaml")
    suite = suite_from_records(name or dst.name, tasks, src)
    meta = {"description": f"converted from {Path(src).name} ({fmt} format)", "source": src}
    suite = replace(suite, **meta, skipped=tuple(skipped))
    write_suite(suite, dst)
    if testlib is not None:
        from grpo_code.tasks.suite import INCLUDE_DIR

        (dst / INCLUDE_DIR).mkdir(exist_ok=True)
        shutil.copyfile(testlib, dst / INCLUDE_DIR / "testlib.h")
    typer.echo(f"wrote {len(suite)} tasks to {dst} (splits: "
               + ", ".join(f"{k} {v}" for k, v in sorted(suite.splits.items())) + ")")
    if skipped:
        typer.echo(f"skipped {len(skipped)} unreadable records (listed above and in {dst / 'suite.yaml'})")
    unjudged = [t.id for t in suite.tasks if t.metadata.get("needs_checker")]
    if unjudged:
        typer.echo(f"{len(unjudged)} tasks accept any of several answers but their tests compare exactly "
                   "(metadata.needs_checker): give them a checker (docs/tasks.md; codeforces: --testlib PATH)")


@command(app, "translate")
def translate(
    suite: SuiteArg,
    dst: Annotated[Path, typer.Argument(help="Suite directory to write (suite.yaml + tasks.jsonl).")],
    language: Annotated[str, typer.Option(help="The language to translate into (a name or alias of `grpo-code "
                                                "sandbox doctor`'s languages).")],
    name: Annotated[str | None, typer.Option(help="Suite name (default: the directory name).")] = None,
    backend: Annotated[str | None, typer.Option(help="Sandbox backend for the Python references: auto, docker or "
                                                     "local.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing suite in DST.")] = False,
    config: ConfigOpt = None,
) -> None:
    """Translate a Python call-test suite into another language, as MultiPL-E translates HumanEval.

    The tests stay the Python suite's call tests, with expected values from its references
    (run through the sandbox first, cached); each prompt becomes the language's own: a
    typed stub with the docstring as a comment for code-prefix tasks, the statement naming
    the language and the signature for instruction tasks. Tasks that cannot be translated
    (a type without a translation, script tests, Python helpers) are listed with the reason
    in suite.yaml `skipped:`.
    """
    from grpo_code.errors import SuiteError
    from grpo_code.sandbox import Sandbox
    from grpo_code.sandbox.languages import ALIASES
    from grpo_code.tasks import load_suite
    from grpo_code.tasks.records import Unreadable
    from grpo_code.tasks.suite import suite_from_records, write_suite
    from grpo_code.tasks.translate import translate_all
    from grpo_code.verify import oracle

    target = ALIASES.get(language) or ALIASES.get(language.lower())
    if target is None:
        raise SuiteError(f"unknown language {language!r}", "languages: " + ", ".join(sorted(set(ALIASES.values()))))
    if (dst / "tasks.jsonl").exists() and not force:
        raise SuiteError(f"{dst} already holds a suite", "pass --force to overwrite or choose another directory")
    cfg = _config(config, None)
    source = load_suite(suite, cfg.tasks.paths)
    with Sandbox(replace(cfg.sandbox, **({"backend": backend} if backend else {}))) as sandbox:
        resolved = oracle.prepare(source, sandbox, log=typer.echo)
    done, skipped = translate_all(list(resolved.tasks), target)
    if not done:
        reasons = sorted({why for _, why in skipped})
        raise SuiteError(f"no task of {source.name} translates into {target}", "; ".join(reasons[:3]))
    index = {t.id: i for i, t in enumerate(source.tasks)}
    left_out = tuple(Unreadable(index.get(i, -1), i, "(translation)", why) for i, why in skipped)
    out = suite_from_records(name or dst.name, done, str(dst))
    out = replace(out, description=f"{source.name} translated into {target} ({len(done)} of "
                                   f"{len(source.tasks)} tasks)", language=target, mode=source.mode,
                  limits=source.limits, source=source.source, license=source.license, skipped=left_out)
    write_suite(out, dst)
    typer.echo(f"wrote {len(done)} tasks to {dst}; {len(skipped)} not translated (listed in suite.yaml skipped:)")


@command(app, "check")
def check(
    suite: SuiteArg,
    overrides: OverridesArg = None,
    solutions: Annotated[str, typer.Option(help="both, reference, empty, or a JSONL file of task_id + completion/solution.")] = "both",
    repeat: Annotated[int, typer.Option(help="Run each solution this many times to find flaky tasks.")] = 1,
    split: Annotated[str | None, typer.Option(help="Only this split (name, id range A-B, or all).")] = None,
    backend: Annotated[str | None, typer.Option(help="Sandbox backend: auto, docker or local.")] = None,
    workers: Annotated[int | None, typer.Option(help="Concurrent jobs (default: CPU count).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as one JSON object.")] = False,
    audit: Annotated[bool, typer.Option("--audit", help="Then audit the tests: shortcuts and mutants "
                                                      "(`grpo-code tasks audit`, its defaults).")] = False,
    config: ConfigOpt = None,
) -> None:
    """Run reference and empty solutions through the sandbox: references must pass, empties must fail.

    The empty solution is a stub that defines the entry point and returns nothing. Tasks
    whose expected values come from their reference get them first (cached). Exits 1 when
    a reference (or a solution of --solutions FILE) fails, a file's solutions check
    nothing, an empty solution passes a test, or a task is flaky; a suite without
    references exits 0 and says "no reference".
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from grpo_code.sandbox import Sandbox, resolve_backend
    from grpo_code.tasks import load_suite
    from grpo_code.verify.check import check_suite

    cfg = _config(config, overrides)
    sb_cfg = replace(cfg.sandbox, **{k: v for k, v in (("backend", backend), ("workers", workers)) if v is not None})
    s = load_suite(suite, cfg.tasks.paths).split(split)
    err = Console(stderr=True)
    with Sandbox(sb_cfg) as sandbox, Progress(TextColumn("checking {task.description}"), BarColumn(),
                                              MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                                              disable=as_json) as bar:
        job = bar.add_task(s.name, total=None)
        report = check_suite(s, sandbox, solutions, repeat,
                             progress=lambda done, total: bar.update(job, completed=done, total=total))
        audited = None
        if audit:
            from grpo_code.verify.audit import audit_suite, save_last

            bar.update(job, description=f"{s.name} (audit)", completed=0, total=None)
            audited = audit_suite(s, sandbox, progress=lambda done, total: bar.update(job, completed=done,
                                                                                      total=total))
        ran = any(c.runs for items in report.checks.values() for c in items)
        # Naming the backend of a sandbox that ran nothing would start it.
        backend = sandbox.backend if ran else resolve_backend(sb_cfg)
    summary = report.summary()
    summary["backend"] = backend
    saved = save_last(audited) if audited is not None else None
    if audited is not None:
        summary["audit"] = audited.summary()
    if as_json:
        typer.echo(json.dumps(summary))
    else:
        _print_report(summary)
        if audited is not None:
            from grpo_code.cli.audit_report import print_audit

            print_audit(summary["audit"], saved)
    if audited is not None:
        from grpo_code.verify.audit import require_clean

        require_clean(audited)
    if not report.ok:
        raise typer.Exit(1)


def _print_report(s: dict) -> None:
    from rich.console import Console

    out = Console()
    out.print(f"suite [bold]{s['suite']}[/bold]: {s['tasks']} tasks, hash {s['suite_hash']}, "
              f"{s['repeat']} run(s) each, backend {s['backend']}")

    def names(ids: list[str]) -> str:
        return ", ".join(ids[:10]) + (f" (+{len(ids) - 10} more)" if len(ids) > 10 else "")

    for kind in ("reference", "file"):
        if kind in s:
            r = s[kind]
            color = "green" if not r["failed"] else "red"
            missing = r.get("no_reference", r.get("missing", []))
            if not r["checked"] and kind == "reference":
                out.print(f"reference: [yellow]no reference: none of the {s['tasks']} tasks has one, "
                          "so no reference was checked[/yellow]")
            elif not r["checked"]:
                out.print("file: [red]nothing checked: the file has no solution for these tasks[/red]")
            else:
                out.print(f"{kind}: [{color}]{r['passed']}/{r['checked']} pass[/{color}]")
            for task_id in r["failed"][:20]:
                out.print(f"  [red]{task_id}[/red]: {r['failures'].get(task_id) or 'failed'}", markup=True,
                          highlight=False)
            if len(r["failed"]) > 20:
                out.print(f"  (+{len(r['failed']) - 20} more failing; --json lists all)")
            if missing and r["checked"]:
                out.print(f"  [yellow]no {'reference' if kind == 'reference' else 'solution'} "
                          f"({len(missing)}): {names(missing)}[/yellow]")
            if r["flaky"]:
                out.print(f"  [red]flaky: {names(r['flaky'])}[/red]")
            if r["infra_errors"]:
                out.print(f"  [yellow]sandbox errors: {names(r['infra_errors'])}[/yellow]")
            if r.get("unattested_tests"):
                tasks = r.get("unattested_tasks", [])
                out.print(f"  [yellow]unattested: {len(tasks)} of {s['tasks']} tasks have test(s) judged inside the "
                          f"program's process ({r['unattested_tests']} in all); their passes count as fails for the "
                          f"reward and eval unless rewards.tests.trust_unattested (docs/rewards.md): "
                          f"{names(tasks)}[/yellow]")
    if "empty" in s:
        e = s["empty"]
        color = "green" if not e["broken"] else "red"
        out.print(f"empty: [{color}]{e['failed']}/{e['checked']} fail[/{color}]")
        if e["broken"]:
            out.print(f"  [red]the empty solution passes some tests of {len(e['broken'])} tasks "
                      "(a test a stub passes checks nothing, and rewards the stub):[/red]")
        for task_id in e["broken"][:20]:
            passed = e["passed_tests"].get(task_id, [])
            shown = ", ".join(map(str, passed[:8])) + (f" (+{len(passed) - 8} more)" if len(passed) > 8 else "")
            out.print(f"  [red]{task_id}[/red]: test(s) {shown}")
        if e.get("skipped"):
            out.print(f"  [yellow]not run (no expected values): {names(e['skipped'])}[/yellow]")
        if e["infra_errors"]:
            out.print(f"  [yellow]sandbox errors: {names(e['infra_errors'])}[/yellow]")
    if s["slow"]:
        out.print("[yellow]slow (a test over half its time limit): "
                  + ", ".join(f"{x['id']} {x['max_test_ms']:.0f} ms" for x in s["slow"][:10]) + "[/yellow]")
