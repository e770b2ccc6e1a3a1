"""The ``grpo-code`` command line: thin commands over the library, one error boundary.

Each command parses its arguments, loads the config and calls one library function.
Heavy libraries (torch, transformers, trl, vllm) are imported inside commands so that
``grpo-code --help`` stays instant. Command groups live in sibling modules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from grpo_code import __version__
from grpo_code.cli import audit_cmd  # noqa: F401 (registers `tasks audit`)
from grpo_code.cli import config_cmd, eval_cmd, models_cmd, report_cmd, sandbox_cmd, tasks_cmd
from grpo_code.cli.common import ConfigArg, OverridesArg, command, quiet_exit

app = typer.Typer(
    name="grpo-code",
    help="Train code LLMs with GRPO on verifiable rewards from sandboxed unit tests.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"grpo-code {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Train code LLMs with GRPO on verifiable rewards from sandboxed unit tests."""


@command(app, "train")
def train(
    config: ConfigArg = None,
    overrides: OverridesArg = None,
    resume: Annotated[Path | None, typer.Option(
        "--resume", help="Continue the run in this directory from its last checkpoint (same config).")] = None,
) -> None:
    """Train a model with GRPO on a task suite (default: the CPU demo, the bundled `demo` config).

    Writes the resolved config, metrics.jsonl, completions.jsonl, checkpoints and final/
    to the run directory (output.dir, default runs/<timestamp>-<name>).
    """
    from rich.console import Console

    from grpo_code.train import load_run_config, run_training, summary_lines

    cfg = load_run_config(config, overrides or [], resume)
    err = Console(stderr=True)
    summary = run_training(cfg, resume, log=lambda m: err.print(m, highlight=False), console=err)
    for line in summary_lines(summary, cfg.tasks.suite):
        typer.echo(line)
    quiet_exit(summary.run_dir / "exit.log")  # the summary stays the last thing on the screen


command(app, "eval")(eval_cmd.evaluate)


command(app, "report")(report_cmd.report)


app.add_typer(tasks_cmd.app)
app.add_typer(sandbox_cmd.app)
app.add_typer(config_cmd.app)
app.add_typer(models_cmd.app)


def main() -> None:
    app(prog_name="grpo-code")
