"""User-facing errors.

Library code raises a subclass of :class:`GrpoCodeError` whenever the user can fix the
problem (bad config, missing file, no Docker engine...). The CLI's single error boundary
(``grpo_code.cli``) prints ``error: <what> (<what to do>)`` on one line and exits 2;
anything else is a bug and exits 1. ``GRPO_CODE_DEBUG=1`` shows the traceback.
"""

from __future__ import annotations


class GrpoCodeError(Exception):
    """An error the user can act on: ``what`` went wrong and ``hint`` says what to do."""

    exit_code = 2

    def __init__(self, what: str, hint: str | None = None):
        super().__init__(what)
        self.what = what
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.what} ({self.hint})" if self.hint else self.what


class ConfigError(GrpoCodeError):
    """One or more problems in a run config; all of them are reported at once."""

    def __init__(self, problems: list[str], source: str | None = None):
        self.problems = list(problems)
        self.source = source
        where = f"{source}: " if source else ""
        count = f"{len(self.problems)} config problems: " if len(self.problems) > 1 else ""
        super().__init__(
            where + count + "; ".join(self.problems),
            "fix the config file or override; `grpo-code config show` prints the resolved config",
        )


class MissingFileError(GrpoCodeError):
    """A path given by the user does not exist or cannot be read."""


class ModelError(GrpoCodeError):
    """A model cannot be found, fetched or loaded."""


class SuiteError(GrpoCodeError):
    """A task suite cannot be found or is malformed."""


class SandboxError(GrpoCodeError):
    """The sandbox cannot run (no engine, missing image, bad job)."""


class RewardError(GrpoCodeError):
    """Rewards cannot be trusted or computed (too many masked, bad test weights, reward model)."""
