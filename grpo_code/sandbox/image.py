"""Building the sandbox images (``grpo-code sandbox build``).

The image is ``sandboxes/<lang>/Dockerfile`` built through the Docker SDK (the engine's
API, legacy builder) with ``--network none`` from a temporary context holding the
Dockerfile and the sandbox runtime (the ``executor/`` package, with its runners and
``harness/``). It is labelled with a hash of
(Dockerfile, runtime files, base image id), so a rebuild is skipped when nothing changed.
``--bootstrap`` makes the base image without any registry: ``mmdebstrap --variant=apt
--include=<the language's packages> <codename>`` from the host's Debian sources (python3
for every language, plus nodejs or g++), cached as a tarball under ``$GRPO_CODE_CACHE``
(default ``~/.cache/grpo-code``), then imported through the API (``docker import``). Only
mmdebstrap runs as a subprocess.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from grpo_code import resources
from grpo_code.config import SandboxConfig
from grpo_code.errors import SandboxError
from grpo_code.paths import cache_dir
from grpo_code.sandbox import engine
from grpo_code.sandbox.languages import FACTS
from grpo_code.sandbox.local_backend import EXECUTOR

RUNTIME_DIR = EXECUTOR.parent
HARNESS_SUFFIXES = (".py", ".js", ".hpp", ".go", ".rs", ".java", ".rb", ".php", ".pl", ".lua", ".R", ".rkt", ".sh")
"""The executor package's files: Python and each language's harness sources."""
RUNTIME = sorted(p for p in RUNTIME_DIR.rglob("*") if p.is_file() and p.suffix in HARNESS_SUFFIXES)
"""What every image gets as /opt/grpo-code/executor (the package, its runners and harnesses)."""
DEFAULT_BASE = {"python": "python:3.12-slim"}
"""Registry base images; other languages need python3 and their toolchain in one image,
which no official image has: they use --bootstrap or --base-image."""
BOOTSTRAP_PACKAGES = {k: list(v.bootstrap_packages) for k, v in FACTS.items()}
HASH_LABEL = "grpo-code.build-hash"
EXECUTOR_LABEL = "grpo-code.executor-hash"
BOOTSTRAP_LABEL = "grpo-code.bootstrap"
DEFAULT_IMAGES = {k: v.image for k, v in FACTS.items()}

Log = Callable[[str], None]


@dataclass(frozen=True)
class BuildReport:
    image: str
    base_image: str
    built: bool
    """False when the image was already up to date."""
    build_hash: str


def image_name(language: str) -> str:
    """The image `grpo-code sandbox build --lang LANGUAGE` makes."""
    return DEFAULT_IMAGES.get(language, f"grpo-code-sandbox-{language}:latest")


def default_image(config: SandboxConfig, language: str = "python") -> str:
    """The image a sandbox runs a language in: ``sandbox.image`` for Python when set, else the built one."""
    if language == "python" and config.image:
        return config.image
    return image_name(language)


def dockerfile(lang: str) -> Path:
    """``sandboxes/<lang>/Dockerfile``, from the wheel or the checkout (grpo_code/resources.py);
    a language judged by its own toolchain without one uses ``sandboxes/toolchain/``."""
    own = resources.bundled_dir("sandboxes") / lang / "Dockerfile"
    if not own.is_file() and lang in FACTS:
        return resources.sandbox_dir("toolchain") / "Dockerfile"
    return resources.sandbox_dir(lang) / "Dockerfile"


def _run(argv: list[str], what: str, timeout: float = 1800, env: dict[str, str] | None = None) -> str:
    try:
        out = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
        )
    except FileNotFoundError:
        raise SandboxError(f"{argv[0]} is not installed", f"install it (apt-get install {argv[0]})") from None
    except subprocess.TimeoutExpired:
        raise SandboxError(
            f"{what} took longer than {timeout:.0f}s", "check the engine and the package mirror"
        ) from None
    if out.returncode != 0:
        tail = (out.stderr or out.stdout).strip().splitlines()[-8:]
        raise SandboxError(
            f"{what} failed: {' | '.join(tail)}", "see the message; rerun with GRPO_CODE_DEBUG=1"
        )
    return out.stdout


# --------------------------------------------------------------------------- bootstrap


def host_debian_sources(root: str | os.PathLike[str] = "/") -> tuple[str, list[str]]:
    """The host's Debian codename and its Debian apt entries as one-line ``deb`` sources."""
    etc = Path(root) / "etc"
    try:
        release = (etc / "os-release").read_text()
    except OSError:
        release = ""
    fields = dict(
        (k, v.strip('"')) for k, _, v in (line.partition("=") for line in release.splitlines()) if k
    )
    codename = fields.get("VERSION_CODENAME")
    if fields.get("ID") != "debian" or not codename:
        raise SandboxError(
            "--bootstrap needs a Debian host (it builds the base image from the host's Debian sources)",
            "pass --base-image with an image that has python3, e.g. python:3.12-slim",
        )
    entries: list[str] = []
    files = [etc / "apt" / "sources.list", *sorted((etc / "apt" / "sources.list.d").glob("*"))]
    for path in files:
        try:
            text = path.read_text()
        except OSError:
            continue
        if path.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                kv: dict[str, str] = {}
                for line in stanza.splitlines():
                    if line.strip().startswith("#") or ":" not in line:
                        continue
                    key, _, value = line.partition(":")
                    kv[key.strip().lower()] = value.strip()
                if "deb" not in kv.get("types", "").split():
                    continue
                for uri in kv.get("uris", "").split():
                    for suite in kv.get("suites", "").split():
                        entries.append(f"deb {uri} {suite} {kv.get('components', 'main')}")
        elif path.suffix == ".list" or path.name == "sources.list":
            entries += [
                line.split("#")[0].strip() for line in text.splitlines() if line.strip().startswith("deb ")
            ]
    ours = []
    for entry in entries:
        parts = [p for p in re.sub(r"\[[^\]]*\]", "", entry).split() if p]
        if (
            len(parts) >= 4
            and (parts[2] == codename or parts[2].startswith(codename + "-"))
            and "main" in parts[3:]
        ):
            ours.append(f"deb {parts[1]} {parts[2]} main")
    if not ours:
        ours = [
            f"deb http://deb.debian.org/debian {codename} main",
            f"deb http://deb.debian.org/debian {codename}-updates main",
            f"deb http://deb.debian.org/debian-security {codename}-security main",
        ]
    return codename, list(dict.fromkeys(ours))


def bootstrap_base(lang: str, log: Log = print) -> str:
    """Make (or reuse) the base image built from the host's Debian sources; returns its name."""
    packages = BOOTSTRAP_PACKAGES.get(lang)
    if packages is None:
        raise SandboxError(f"--bootstrap does not know language {lang!r}", "pass --base-image instead")
    codename, sources = host_debian_sources()
    key = hashlib.sha256("\n".join([codename, *packages, *sources]).encode()).hexdigest()[:16]
    name = f"grpo-code-base-{lang}:{codename}"
    if engine.image_id(name) and engine.image_label(name, BOOTSTRAP_LABEL) == key:
        log(f"base image {name} is up to date")
        return name
    tarball = cache_dir() / "bootstrap" / f"debian-{codename}-{'-'.join(packages)}-{key}.tar"
    if tarball.is_file():
        log(f"using cached rootfs {tarball}")
    else:
        if shutil.which("mmdebstrap") is None:
            raise SandboxError(
                "mmdebstrap is not installed", "apt-get install mmdebstrap (needed by --bootstrap)"
            )
        tarball.parent.mkdir(parents=True, exist_ok=True)
        log(f"building a {codename} rootfs with {', '.join(packages)} (mmdebstrap, ~20 s)")
        tmp = str(tarball.parent / f".{tarball.stem}.{os.getpid()}.part.tar")
        try:
            _run(
                [
                    "mmdebstrap",
                    "--quiet",
                    "--variant=apt",
                    f"--include={','.join(packages)}",
                    codename,
                    tmp,
                    *sources,
                ],
                "mmdebstrap",
            )
            os.replace(tmp, tarball)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    log(f"importing {tarball.name} as {name}")
    engine.import_tarball(tarball, name, [f"LABEL {BOOTSTRAP_LABEL}={key}"])
    return name


# --------------------------------------------------------------------------- build


@functools.cache
def executor_hash() -> str:
    """Hash of the sandbox runtime (executor, runners, harnesses); images carry it so a
    stale image is detected. Read once per process: every reward-cache key carries it."""
    h = hashlib.sha256()
    for path in RUNTIME:
        name = path.relative_to(RUNTIME_DIR).as_posix()
        h.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]


def build_hash(lang: str, base_id: str) -> str:
    h = hashlib.sha256()
    for part in (dockerfile(lang).read_bytes(), executor_hash().encode(), base_id.encode()):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:24]


def build(
    lang: str = "python",
    base_image: str | None = None,
    bootstrap: bool = False,
    tag: str | None = None,
    force: bool = False,
    log: Log = print,
) -> BuildReport:
    """Build the sandbox image for ``lang`` unless an up-to-date one exists."""
    dockerfile(lang)
    if engine.engine_version() is None:
        raise SandboxError("no Docker engine answers", "start dockerd, then rerun `grpo-code sandbox build`")
    tag = tag or image_name(lang)
    if bootstrap and base_image is None:
        base_image = bootstrap_base(lang, log)
    if base_image is None and lang not in DEFAULT_BASE:
        raise SandboxError(
            f"there is no registry base image for {lang} (it needs python3 and its toolchain in one image)",
            f"use `grpo-code sandbox build --lang {lang} --bootstrap`, or --base-image with such an image",
        )
    base_image = base_image or DEFAULT_BASE[lang]
    base_id = engine.image_id(base_image)
    if base_id is None:
        log(f"pulling {base_image}")
        try:
            engine.pull_image(base_image)
        except SandboxError as exc:
            raise SandboxError(
                f"base image {base_image!r} is not available ({exc.what})",
                "without a registry use `grpo-code sandbox build --bootstrap` (builds the base from Debian sources)",
            ) from None
        base_id = engine.image_id(base_image) or ""
    digest = build_hash(lang, base_id)
    old_id = engine.image_id(tag)
    if not force and old_id and engine.image_label(tag, HASH_LABEL) == digest:
        log(f"{tag} is up to date (base {base_image})")
        return BuildReport(tag, base_image, False, digest)
    log(f"building {tag} from {base_image}")
    with tempfile.TemporaryDirectory(prefix="grpo-code-build-") as ctx:
        shutil.copy(dockerfile(lang), Path(ctx) / "Dockerfile")
        for path in RUNTIME:
            target = Path(ctx) / "executor" / path.relative_to(RUNTIME_DIR)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
        engine.build_image(
            ctx,
            tag,
            buildargs={"BASE_IMAGE": base_image, "LANGUAGE": lang},
            labels={HASH_LABEL: digest, EXECUTOR_LABEL: executor_hash()},
        )
    new_id = engine.image_id(tag)
    if old_id and old_id != new_id:
        engine.remove_image(old_id)
    log(f"built {tag}")
    return BuildReport(tag, base_image, True, digest)
