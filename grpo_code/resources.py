"""Where the bundled run configs, task suites and sandbox image definitions are.

The repository keeps them at its top (``configs/``, ``tasks/``, ``sandboxes/``); the wheel
carries them inside the package as ``grpo_code/_bundled/<kind>/`` (pyproject.toml,
``[tool.setuptools.package-dir]``). Both places are found from the package itself through
:func:`importlib.resources.files`, so the answer does not depend on the working directory:

- installed from a wheel: ``files("grpo_code") / "_bundled" / kind``;
- editable install, or a clone on ``sys.path``: the package sits in its source checkout
  (the directory above it holds grpo-code's ``pyproject.toml``), and ``kind`` is at its top.

Nothing falls back silently: a kind, config or suite that is not there is a
:class:`~grpo_code.errors.MissingFileError` naming every place that was looked in.
"""

from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path

from grpo_code.errors import MissingFileError, SandboxError

KINDS = ("configs", "tasks", "sandboxes")
BUNDLED = "_bundled"
WHAT = {"configs": "run configs", "tasks": "task suites", "sandboxes": "sandbox image definitions"}
_REINSTALL = "reinstall grpo-code (pip install --force-reinstall grpo-code) or run it from a source checkout"


def package_dir() -> Path:
    """The installed ``grpo_code`` package directory (a real directory: the image build copies files)."""
    root = files("grpo_code")
    if not isinstance(root, Path):  # a zip import: nothing here can hand docker a file
        raise MissingFileError(f"grpo_code is imported from an archive ({root})", "install it with pip")
    return root


def source_checkout() -> Path | None:
    """The source checkout the package is imported from (editable install or clone), else None."""
    top = package_dir().parent
    try:
        text = (top / "pyproject.toml").read_text()
    except OSError:
        return None
    return top if re.search(r'^name\s*=\s*"grpo-code"\s*$', text, re.M) else None


def candidates(kind: str) -> list[Path]:
    """The places looked in for ``kind``, in order: the wheel's copy, then the checkout's."""
    if kind not in KINDS:
        raise ValueError(f"unknown resource kind {kind!r}")
    out = [package_dir() / BUNDLED / kind]
    checkout = source_checkout()
    if checkout is not None:
        out.append(checkout / kind)
    return out


def bundled_dir(kind: str) -> Path:
    """The directory of the bundled ``kind`` (``configs``, ``tasks`` or ``sandboxes``)."""
    looked = candidates(kind)
    for path in looked:
        if path.is_dir():
            return path
    raise MissingFileError(
        f"the bundled {WHAT[kind]} are missing (looked in {', '.join(map(str, looked))})", _REINSTALL
    )


def config_names() -> list[str]:
    """Names of the bundled run configs (``demo``, ...): the YAML files at the top of ``configs/``
    (``configs/accelerate/`` holds launcher configs for ``accelerate launch``, not run configs)."""
    return sorted(p.stem for p in bundled_dir("configs").glob("*.yaml"))


def config_candidates(name: str) -> list[Path]:
    """Where a bundled config called ``name`` (``demo``, ``demo.yaml``, ``accelerate/zero3``) would be."""
    stem = name[: -len(".yaml")] if name.endswith(".yaml") else name
    return [root / f"{stem}.yaml" for root in candidates("configs")]


def config(name: str) -> Path:
    """A bundled config by name (``demo``, ``demo.yaml``, ``accelerate/zero3``)."""
    looked = config_candidates(name)
    for path in looked:
        if path.is_file():
            return path
    known = config_names() if any(p.parent.is_dir() for p in looked) else []
    raise MissingFileError(
        f"no bundled config {name!r} (looked in {', '.join(map(str, looked))})",
        f"bundled configs: {', '.join(known)}" if known else _REINSTALL,
    )


def sandbox_dir(lang: str) -> Path:
    """The image definition directory of ``lang`` (holds its ``Dockerfile``)."""
    root = bundled_dir("sandboxes")
    path = root / lang
    if not (path / "Dockerfile").is_file():
        known = sorted(p.name for p in root.iterdir() if (p / "Dockerfile").is_file())
        raise SandboxError(
            f"no sandbox image definition for language {lang!r} ({path / 'Dockerfile'} not found)",
            f"known languages: {', '.join(known) or 'none'}",
        )
    return path
