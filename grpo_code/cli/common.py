"""The CLI's one error boundary and small shared helpers for command modules.

Every command is registered through :func:`command`, which wraps it so that a
:class:`~grpo_code.errors.GrpoCodeError` becomes ``error: <what> (<what to do>)`` on one
line of stderr and exit code 2, Ctrl-C exits 130, and any other exception (a bug) prints
one line and exits 1. ``GRPO_CODE_DEBUG=1`` re-raises so the traceback shows.

Commands that load a run config take it the same way (:data:`ConfigArg`, or
:data:`ConfigOpt` where positional arguments name something else) and take dotted
``key=value`` overrides as positional arguments (:data:`OverridesArg`,
:func:`split_overrides`); docs/cli.md, "Configuration", documents the syntax.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from grpo_code.config_load import is_override
from grpo_code.errors import GrpoCodeError

F = TypeVar("F", bound=Callable[..., Any])


def debug_enabled() -> bool:
    return os.environ.get("GRPO_CODE_DEBUG", "").lower() not in ("", "0", "false", "no")


def eprint(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def guarded(fn: F) -> F:
    """Wrap a command function with the error boundary (signature kept for Typer)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except GrpoCodeError as exc:
            if debug_enabled():
                raise
            eprint(f"error: {exc}")
            quiet_after_error()
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            if debug_enabled():
                raise
            eprint("error: interrupted (partial outputs are kept; rerun the command to continue)")
            quiet_after_error()
            raise typer.Exit(130) from None
        except Exception as exc:  # a bug: say so on one line, traceback on demand
            if debug_enabled():
                raise
            eprint(
                f"error: unexpected {type(exc).__name__}: {exc} "
                "(this is a bug; rerun with GRPO_CODE_DEBUG=1 for the traceback and report it)"
            )
            quiet_after_error()
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


def command(app: typer.Typer, *args: Any, **kwargs: Any) -> Callable[[F], F]:
    """``@app.command`` with the error boundary applied."""

    def decorator(fn: F) -> F:
        app.command(*args, **kwargs)(guarded(fn))
        return fn

    return decorator


CONFIG_HELP = "Run config: a YAML file or a bundled config's name (`grpo-code config list`). Default: demo."
ConfigArg = Annotated[Path | None, typer.Argument(help=CONFIG_HELP, show_default=False)]
ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help=CONFIG_HELP, show_default=False)]
OVERRIDES_HELP = "Dotted config overrides key=value, e.g. sandbox.workers=4 train.trl.learning_rate=1e-5."
OverridesArg = Annotated[list[str] | None, typer.Argument(help=OVERRIDES_HELP, show_default=False)]


def split_overrides(args: list[str] | None) -> tuple[list[str], list[str]]:
    """Positional arguments -> (the others, the overrides), each in the order given."""
    args = args or []
    return [a for a in args if not is_override(a)], [a for a in args if is_override(a)]


NOISY_AT_EXIT = ("vllm", "triton")
"""Libraries that print at interpreter exit (vLLM's shutdown lines, nanobind's leak report
for triton's objects)."""


def quiet_after_error() -> None:
    """After an error line, with a library loaded that prints at exit, what the process
    writes from here on goes to ``<cache>/logs/exit.log`` (started anew), so the error stays
    the last line on the screen."""
    if not any(name in sys.modules for name in NOISY_AT_EXIT):
        return
    from grpo_code.paths import cache_dir

    path = cache_dir() / "logs" / "exit.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    except OSError:
        return
    quiet_exit(path)


def quiet_exit(log_path: Path) -> None:
    """Send what the process writes from here on (fds 1 and 2) to ``log_path``, so the
    command's last lines on the user's screen stay its own: libraries print at interpreter
    exit (nanobind's leak report for triton's objects, vLLM's engine shutdown), after the
    summary. Nothing is lost; the file keeps it. Only for a real process's own terminal or
    pipes: under a test runner that swapped ``sys.stdout`` for a buffer, nothing changes."""
    streams = (sys.stdout, sys.stderr)
    try:
        fds = [stream.fileno() for stream in streams]
    except (AttributeError, OSError, ValueError):
        return
    if sorted(fds) != [1, 2]:
        return
    for stream in streams:
        stream.flush()
    target = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for fd in (1, 2):
        os.dup2(target, fd)
    os.close(target)
