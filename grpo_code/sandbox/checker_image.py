"""C++ checkers compiled in the C++ sandbox image (the docker backend's compiler for
:mod:`~grpo_code.sandbox.native_checker`)."""

from __future__ import annotations

import io
import tarfile

from grpo_code.errors import SandboxError
from grpo_code.sandbox import engine
from grpo_code.sandbox.image import image_name
from grpo_code.sandbox.native_checker import COMPILE_TIMEOUT_S, FLAGS, compile_failed


def compile_checker(files: dict[str, str]) -> bytes:
    """A throwaway container of the C++ image, without network: the sources go in as a tar,
    the binary comes out as one."""
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    api = engine.client(COMPILE_TIMEOUT_S + 30).api
    argv = ["g++", *FLAGS, "-o", "/tmp/checker", "checker.cpp"]
    try:
        made = api.create_container(image_name("cpp"), command=argv, working_dir="/tmp", network_disabled=True,
                                    user="0", entrypoint=[],
                                    host_config=api.create_host_config(mem_limit="2g", pids_limit=256))
    except Exception as exc:  # noqa: BLE001 - the engine's errors, named
        raise SandboxError(f"cannot start the C++ image to compile a checker: {exc}",
                           "build it: grpo-code sandbox build --lang cpp") from None
    cid = made["Id"]
    try:
        api.put_archive(cid, "/tmp", packed.getvalue())
        api.start(cid)
        code = api.wait(cid, timeout=COMPILE_TIMEOUT_S).get("StatusCode")
        if code != 0:
            raise compile_failed(api.logs(cid).decode("utf-8", "replace"))
        stream, _ = api.get_archive(cid, "/tmp/checker")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.extractfile("checker")
            assert member is not None
            return member.read()
    finally:
        try:
            api.remove_container(cid, force=True)
        except Exception:  # noqa: BLE001 - gone already
            pass
