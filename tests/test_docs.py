"""The README and docs stay true: the README is short, every command it shows exists with
the options it uses, every script it names is there, and every link between the docs
leads to a file and a heading that exist."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import REPO
from grpo_code.cli import app

README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
runner = CliRunner()


def bash_lines(path: Path) -> list[str]:
    """The commands of the file's ```bash blocks (continuation lines joined)."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", path.read_text(), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line and not line.startswith("#"):
                out.append(line)
    return out


def grpo_commands(path: Path) -> list[list[str]]:
    return [shlex.split(line)[1:] for line in bash_lines(path) if line.startswith("grpo-code ")]


def subcommand(args: list[str]) -> tuple[list[str], list[str]]:
    """(the command path, e.g. ["sandbox", "exec"], the options it was given)."""
    groups = {"tasks", "sandbox", "config", "models"}
    path = args[:2] if args and args[0] in groups else args[:1]
    return path, [a.split("=")[0] for a in args if a.startswith("--")]


def test_the_readme_is_short() -> None:
    assert len(README.read_bytes()) <= 12 * 1024


def test_the_quickstart_has_the_two_commands() -> None:
    quick = README.read_text().split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"```bash\n(.*?)\n```", quick) == ["bash scripts/demo.sh", "bash scripts/test.sh"]


@pytest.mark.parametrize("args", grpo_commands(README), ids=lambda a: " ".join(a)[:60])
def test_every_readme_command_exists_with_the_options_it_uses(args: list[str]) -> None:
    path, options = subcommand(args)
    result = runner.invoke(app, [*path, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    for option in options:
        assert option in result.output, f"grpo-code {' '.join(path)} has no {option}"
    overrides = [a for a in args if "=" in a and not a.startswith("-")]
    if overrides:  # the keys exist and the values are valid
        from grpo_code.config import load_config

        load_config(None, overrides)


def test_every_script_the_readme_runs_is_there() -> None:
    named = re.findall(r"\bscripts/[\w.-]+", README.read_text())
    assert named and all((REPO / n).is_file() for n in named), [n for n in named if not (REPO / n).is_file()]


def slug(heading: str) -> str:
    """The anchor a Markdown renderer gives a heading (GitHub's rule)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_every_local_link_leads_somewhere(doc: Path) -> None:
    broken = []
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (doc.parent / file).resolve() if file else doc
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(target)
    assert not broken, f"{doc.name}: {broken}"
