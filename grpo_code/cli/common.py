"""The CLI's one error boundary and small shared helpers for command modules.

Every command is registered through :func:`command`, which wraps it so that a
:class:`~grpo_code.errors.GrpoCodeError` becomes ``error: <what> (<what to do>)`` on one
line of stderr and exit code 2, Ctrl-C exits 130, and any other exception (a bug) prints
one line and exits 1. ``GRPO_CODE_DEBUG=1`` re-raises so the traceback shows.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer

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
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            if debug_enabled():
                raise
            eprint("error: interrupted (partial outputs are kept; rerun the command to continue)")
            raise typer.Exit(130) from None
        except Exception as exc:  # a bug: say so on one line, traceback on demand
            if debug_enabled():
                raise
            eprint(
                f"error: unexpected {type(exc).__name__}: {exc} "
                "(this is a bug; rerun with GRPO_CODE_DEBUG=1 for the traceback and report it)"
            )
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


def command(app: typer.Typer, *args: Any, **kwargs: Any) -> Callable[[F], F]:
    """``@app.command`` with the error boundary applied."""

    def decorator(fn: F) -> F:
        app.command(*args, **kwargs)(guarded(fn))
        return fn

    return decorator


def make_group(name: str, help: str) -> typer.Typer:
    return typer.Typer(name=name, help=help, no_args_is_help=True, add_completion=False)
