"""``grpo-code config``: print the resolved run config, validate config files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from grpo_code.cli.common import ConfigArg, OverridesArg, command, eprint
from grpo_code.errors import ConfigError, GrpoCodeError

app = typer.Typer(name="config", help="Show the resolved run config or validate config files.",
                  no_args_is_help=True, add_completion=False)


@command(app, "show")
def show(
    config: ConfigArg = None,
    overrides: OverridesArg = None,
) -> None:
    """Print the resolved config (file + overrides + defaults) as YAML."""
    from grpo_code.config import load_config

    typer.echo(load_config(config, overrides or []).to_yaml(), nl=False)


@command(app, "list")
def list_() -> None:
    """List the bundled configs with their files: run configs by the name `train`/`config show`
    take, and the launcher configs for `accelerate launch --config_file`."""
    from grpo_code import resources

    root = resources.bundled_dir("configs")
    for path in sorted(root.rglob("*.yaml"), key=lambda p: (len(p.relative_to(root).parts), p.name)):
        name = path.relative_to(root).with_suffix("").as_posix()
        typer.echo(f"{name:34} {path}")


@command(app, "validate")
def validate(
    configs: Annotated[list[Path], typer.Argument(help="Config files to check.")],
    trl: Annotated[bool, typer.Option("--trl/--no-trl",
                                      help="Also check train.trl keys against trl.GRPOConfig (imports trl).")] = True,
) -> None:
    """Check config files; every problem of every file is reported, exit 2 if any."""
    from grpo_code.config import check_trl_keys, load_config

    failed = 0
    for path in configs:
        try:
            cfg = load_config(path)
            problems = check_trl_keys(cfg) if trl else []
            if problems:
                raise ConfigError(problems, str(path))
        except GrpoCodeError as exc:
            failed += 1
            eprint(f"error: {exc}")
            continue
        typer.echo(f"ok: {path}")
    if failed:
        raise typer.Exit(2)
