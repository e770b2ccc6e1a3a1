"""Image build helpers that need no engine: reading the host's Debian sources, build hashes."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_code.errors import SandboxError
from grpo_code.sandbox import image


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_debian_sources_keep_only_the_hosts_debian_suites(tmp_path):
    write(tmp_path, "etc/os-release", "ID=debian\nVERSION_CODENAME=bookworm\n")
    write(
        tmp_path,
        "etc/apt/sources.list.d/debian.sources",
        "Types: deb\nURIs: http://mirror.local/debian\nSuites: bookworm bookworm-updates\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
        "Types: deb-src\nURIs: http://mirror.local/debian\nSuites: bookworm\nComponents: main\n",
    )
    write(
        tmp_path,
        "etc/apt/sources.list.d/security.list",
        "deb [signed-by=/k.gpg] http://mirror.local/debian-security bookworm-security main contrib\n",
    )
    write(
        tmp_path,
        "etc/apt/sources.list.d/node.sources",
        "Types: deb\nURIs: https://deb.nodesource.com/node_20.x\nSuites: nodistro\nComponents: main\n",
    )
    write(
        tmp_path,
        "etc/apt/sources.list.d/gcloud.list",
        "deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n",
    )
    codename, sources = image.host_debian_sources(tmp_path)
    assert codename == "bookworm"
    assert sources == [
        "deb http://mirror.local/debian bookworm main",
        "deb http://mirror.local/debian bookworm-updates main",
        "deb http://mirror.local/debian-security bookworm-security main",
    ]


def test_debian_sources_default_to_deb_debian_org_and_need_debian(tmp_path):
    write(tmp_path, "etc/os-release", "ID=debian\nVERSION_CODENAME=trixie\n")
    codename, sources = image.host_debian_sources(tmp_path)
    assert (
        codename == "trixie"
        and sources[0] == "deb http://deb.debian.org/debian trixie main"
        and len(sources) == 3
    )
    write(tmp_path, "etc/os-release", "ID=fedora\nVERSION_ID=40\n")
    with pytest.raises(SandboxError, match="--base-image"):
        image.host_debian_sources(tmp_path)


def test_build_hash_tracks_executor_dockerfile_and_base():
    a = image.build_hash("python", "sha256:aaa")
    assert a == image.build_hash("python", "sha256:aaa")
    assert a != image.build_hash("python", "sha256:bbb")
    assert len(image.executor_hash()) == 16
    with pytest.raises(SandboxError, match="no sandbox image definition"):
        image.dockerfile("cobol")


def test_every_language_has_an_image_definition_and_bootstrap_packages():
    from grpo_code.sandbox.types import LANGUAGES

    for lang in LANGUAGES:
        assert image.dockerfile(lang).is_file()
        assert image.BOOTSTRAP_PACKAGES[lang][0] == "python3"  # the executor runs in every image
    names = {p.relative_to(image.RUNTIME_DIR).as_posix() for p in image.RUNTIME}
    assert {"__main__.py", "main.py", "zygote.py", "judge.py", "verdict.py", "runners.py", "harness/javascript.js",
            "harness/javascript_snapshot.js", "harness/cpp.hpp"} <= names
