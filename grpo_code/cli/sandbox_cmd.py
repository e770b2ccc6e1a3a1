"""``grpo-code sandbox``: build images, run jobs, check and benchmark the sandbox."""

from __future__ import annotations

import typer

app = typer.Typer(name="sandbox", help="Build images, run jobs, check and benchmark the sandbox.", add_completion=False)


@app.callback(invoke_without_command=True)
def _sandbox(ctx: typer.Context) -> None:
    """Build images, run jobs, check and benchmark the sandbox."""
