"""The docker backend's use of the Docker SDK, without an engine: the container settings
(every isolation setting on the wire), the mapping of the SDK's typed errors to one-line
SandboxErrors, removal retries, image build/pull/import error reports and the attached
(stdin/stdout) channel. The same paths against a real engine are in test_sandbox_docker.py.
"""

from __future__ import annotations

import json
import os
import re
import socket
import struct
import threading
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import docker
import docker.errors
import pytest
import requests

from grpo_code.errors import SandboxError
from grpo_code.sandbox import cpus
from grpo_code.sandbox import docker_backend as db
from grpo_code.sandbox import engine as eng
from grpo_code.sandbox.worker import WorkerLost

IMAGE = "grpo-code-sandbox-python:latest"


def wire_body(spec: db.ContainerSpec) -> dict[str, Any]:
    """The JSON body the SDK posts to /containers/create for ``spec`` (no engine needed)."""
    api = docker.APIClient(base_url="unix:///nonexistent.sock", version="1.41")
    host_config = api.create_host_config(**spec.host_config)
    config = {k: v for k, v in spec.config.items() if k != "name"}  # the name is a query parameter
    return dict(api.create_container_config(**config, host_config=host_config))


# --------------------------------------------------------------------------- container settings


@pytest.mark.parametrize("channel_dir", ["/tmp/grpo-code-sbx-1-abc", None])
def test_every_isolation_setting_reaches_the_engine(channel_dir):
    spec = db.container_spec(IMAGE, "grpo-code-sbx-1-x-1", 512, 64, 128, channel_dir, ("--connect", "/run/s"))
    body = wire_body(spec)
    assert spec.config["name"] == "grpo-code-sbx-1-x-1"
    hc = body["HostConfig"]
    mb = 1024 * 1024
    container = (512 + 128 + 640) * mb
    assert hc["NetworkMode"] == "none"  # --network none
    assert hc["ReadonlyRootfs"] is True  # --read-only
    tmpfs = "rw,nosuid,nodev,noexec,size=128m,nr_inodes=8192,mode=1777"
    assert hc["Tmpfs"] == {"/tmp": tmpfs, "/dev/shm": tmpfs}  # --tmpfs
    assert hc["Memory"] == container and hc["MemorySwap"] == container  # --memory = --memory-swap
    assert hc["PidsLimit"] == 64  # --pids-limit
    assert hc["CapDrop"] == ["ALL"]  # --cap-drop ALL
    assert "CapAdd" not in hc or not hc["CapAdd"]
    assert hc["SecurityOpt"] == ["no-new-privileges"]  # --security-opt
    assert hc["LogConfig"] == {"Type": "none", "Config": {}}  # --log-driver none
    assert hc["Ulimits"] == [{"Name": "core", "Soft": 0, "Hard": 0}]  # --ulimit core=0
    assert hc["Sysctls"] == {"kernel.shmmax": str(128 * mb), "kernel.shmall": str(128 * mb // 4096),  # --sysctl
                             "kernel.shmmni": "32", "kernel.msgmni": "16", "kernel.msgmnb": "16384",
                             "kernel.sem": "64 1024 32 16", "fs.mqueue.queues_max": "16",
                             "fs.mqueue.msg_max": "10", "fs.mqueue.msgsize_max": "8192"}
    assert hc["AutoRemove"] is True  # --rm
    assert not hc.get("Privileged")
    # --user: not root, a uid of the container's own (limits the kernel counts per uid)
    assert body["User"] == f"{db.sandbox_uid('grpo-code-sbx-1-x-1')}:{db.SANDBOX_UID}"
    assert db.sandbox_uid("grpo-code-sbx-1-x-1") >= db.UID_BASE
    assert db.sandbox_uid("grpo-code-sbx-1-x-1") != db.sandbox_uid("grpo-code-sbx-1-x-2")
    assert body["WorkingDir"] == "/tmp"
    assert body["Env"] == ["HOME=/tmp", "TMPDIR=/tmp", "PYTHONDONTWRITEBYTECODE=1"]
    assert body["Labels"] == {db.LABEL: "1", db.OWNER_LABEL: db.owner_tag()}
    assert body["Image"] == IMAGE and body["Tty"] is False
    assert body["Cmd"][:3] == ["python3", "-I", db.EXECUTOR_PATH]
    assert body["Cmd"][-2:] == ["--connect", "/run/s"]
    if channel_dir:  # -d -v DIR:/run/grpo-code:ro
        assert hc["Binds"] == [f"{channel_dir}:{db.CHANNEL_MOUNT}:ro"]
        assert not body["OpenStdin"] and not body["AttachStdin"] and not body["StdinOnce"]
    else:  # -i: stdin attached, closed for good when the host's end closes
        assert "Binds" not in hc or not hc["Binds"]
        assert body["OpenStdin"] and body["AttachStdin"] and body["StdinOnce"]
    # Nothing that would widen the sandbox sneaks in.
    for key in ("Devices", "PortBindings", "CapAdd", "Privileged", "PidMode", "IpcMode", "UsernsMode"):
        assert not hc.get(key), key


def test_a_pinned_container_runs_on_its_cpu_and_says_so_in_a_label():
    body = wire_body(db.container_spec(IMAGE, "n", 256, 32, 64, cpu=3))
    assert body["HostConfig"]["CpusetCpus"] == "3"  # --cpuset-cpus 3
    assert body["Labels"] == {db.LABEL: "1", db.OWNER_LABEL: db.owner_tag(), cpus.CPU_LABEL: "3"}
    assert "CpusetCpus" not in wire_body(db.container_spec(IMAGE, "n", 256, 32, 64))["HostConfig"]


def test_each_container_gets_the_least_used_cpu_counting_other_processes(monkeypatch):
    monkeypatch.setattr(cpus, "_MINE", Counter())
    others = [0, 0, 1, 9]  # another process's containers (9: a CPU not ours to use)
    got = [cpus.claim(lambda: others, [0, 1, 2]) for _ in range(5)]
    assert got == [2, 1, 2, 0, 1]  # ties go to the lowest CPU
    for cpu in got:
        cpus.release(cpu)
    assert not cpus._MINE
    assert cpus.claim(lambda: others, []) is None  # nothing to pin to: no claim


def test_only_a_local_engine_pins_and_a_refused_cpu_turns_pinning_off(monkeypatch, capsys):
    monkeypatch.setattr(cpus, "_OFF", [])
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.1:2375")
    assert cpus.usable() == []  # a remote engine's CPUs are not the ones we see
    monkeypatch.setenv("DOCKER_HOST", "unix:///var/run/docker.sock")
    assert cpus.usable() == sorted(os.sched_getaffinity(0))
    assert not cpus.refused(api_error(500, "no such image"))  # not about a CPU: pinning stays
    assert cpus.usable()
    refusal = api_error(500, "Requested CPUs are not available - requested 7, available: 0-1")
    assert cpus.refused(refusal) and cpus.refused(refusal)
    assert cpus.usable() == []
    err = capsys.readouterr().err
    assert err.count("warning: the docker engine refused to pin") == 1 and "sandbox.pin_cpus=false" in err


def test_create_container_sends_the_spec(monkeypatch):
    calls: dict[str, Any] = {}

    class Api:
        def create_host_config(self, **kw):
            calls["host_config"] = kw
            return {"hc": True}

        def create_container(self, **kw):
            calls["create"] = kw
            return {"Id": "f" * 64}

    monkeypatch.setattr(eng, "client", lambda *a, **k: SimpleNamespace(api=Api()))
    spec = db.container_spec(IMAGE, "n", 256, 32, 64)
    assert db.create_container(spec) == "f" * 64
    assert calls["host_config"] == spec.host_config
    assert calls["create"] == {**spec.config, "host_config": {"hc": True}}


# --------------------------------------------------------------------------- typed errors


def api_error(status: int, message: str, cls: type[docker.errors.APIError] = docker.errors.APIError):
    response = requests.Response()
    response.status_code = status
    return cls(message, response=response, explanation=message)


@pytest.mark.parametrize(
    ("exc", "what", "hint"),
    [
        (api_error(404, "No such image: x", docker.errors.ImageNotFound), r"image not found \(No such image: x\)",
         "grpo-code sandbox build"),
        (api_error(404, "No such container: c", docker.errors.NotFound), r"not found \(No such container: c\)",
         "removed meanwhile"),
        (api_error(409, 'Conflict. The container name "/c" is already in use'), r"conflict \(Conflict\. The",
         "docker rm -f"),
        (api_error(500, "driver failed\nprogramming external connectivity"), r"answered 500 \(driver failed prog",
         "sandbox doctor"),
        (requests.exceptions.ConnectionError("refused"), "no Docker engine answers at", "start dockerd"),
        (docker.errors.DockerException("Error while fetching server API version: refused"),
         "no Docker engine answers at", "start dockerd"),
        (requests.exceptions.ReadTimeout("read timed out"), "did not answer in time", "dockerd is running"),
        (docker.errors.DockerException("something else"), "DockerException: something else", "sandbox doctor"),
    ],
)  # fmt: skip
def test_engine_errors_become_one_line_sandbox_errors(exc, what, hint):
    err = eng.engine_error(exc, "starting container c")
    assert isinstance(err, SandboxError)
    assert err.what.startswith("starting container c: ")
    assert re.search(what, err.what), err.what
    assert hint in (err.hint or "")
    assert "\n" not in str(err)


def test_no_engine_is_a_sandbox_error_and_no_version(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nothing.sock")
    assert eng.engine_version() is None
    with pytest.raises(SandboxError, match=r"no Docker engine answers at unix://.*nothing\.sock"):
        eng.client()
    with pytest.raises(SandboxError, match="no Docker engine answers"):
        db.check_ready(IMAGE)
    assert eng.image_id(IMAGE) is None


class FakeApi:
    """Records calls; ``script`` gives what each call of a method does (raise or return)."""

    def __init__(self, **script: list[Any]):
        self.script = script
        self.calls: list[tuple[str, tuple, dict]] = []

    def __getattr__(self, name: str):
        def call(*args, **kwargs):
            self.calls.append((name, args, kwargs))
            queue = self.script.get(name, [])
            outcome = queue.pop(0) if len(queue) > 1 else (queue[0] if queue else None)
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome

        return call


def fake_client(monkeypatch, api: FakeApi) -> None:
    monkeypatch.setattr(eng, "client", lambda *a, **k: SimpleNamespace(api=api))


def test_removal_retries_conflicts_and_stops_when_gone(monkeypatch):
    api = FakeApi(remove_container=[api_error(409, "removal already in progress"), api_error(409, "again"), None])
    fake_client(monkeypatch, api)
    db._remove_container("c", sleep=lambda s: None)
    assert [c[0] for c in api.calls] == ["remove_container"] * 3
    assert api.calls[0][2] == {"force": True}

    for outcome in (api_error(404, "gone", docker.errors.NotFound), api_error(400, "bad"),
                    requests.exceptions.ConnectionError("down")):  # fmt: skip
        api = FakeApi(remove_container=[outcome])
        fake_client(monkeypatch, api)
        db._remove_container("c", sleep=lambda s: None)
        assert len(api.calls) == 1, outcome


def test_removal_gives_up_after_its_patience(monkeypatch):
    api = FakeApi(remove_container=[api_error(409, "stuck")])
    fake_client(monkeypatch, api)
    db._remove_container("c", patience_s=0.0, sleep=lambda s: None)
    assert 1 <= len(api.calls) <= 2


def factory(channel: str) -> db.DockerFactory:
    f = object.__new__(db.DockerFactory)  # no engine: skip check_ready
    f.image, f.memory_mb, f.pids_limit, f.tmpfs_mb = IMAGE, 256, 32, 64
    f.channel, f.prefix, f.pin_cpus = channel, "grpo-code-sbx-test", False
    return f


@pytest.mark.parametrize("channel", ["socket", "stdio"])
@pytest.mark.parametrize(
    ("exc", "message"),
    [
        (api_error(409, 'name "/x" is already in use'), "conflict"),
        (api_error(404, "No such image", docker.errors.ImageNotFound), "image not found"),
        (api_error(500, "oci runtime error"), "answered 500"),
        (requests.exceptions.ReadTimeout("timed out"), "did not answer in time"),
    ],
)
def test_a_container_that_cannot_start_is_a_lost_worker_with_the_reason(monkeypatch, channel, exc, message):
    api = FakeApi(create_host_config=[{}], create_container=[exc])
    fake_client(monkeypatch, api)
    with pytest.raises(WorkerLost, match=rf"starting container grpo-code-sbx-test-\d+: .*{message}"):
        factory(channel)(1)
    assert ("remove_container" in [c[0] for c in api.calls])  # nothing half-made is left


def test_a_start_failure_removes_the_created_container(monkeypatch):
    api = FakeApi(create_host_config=[{}], create_container=[{"Id": "a" * 64}], start=[api_error(500, "no cgroup")])
    fake_client(monkeypatch, api)
    with pytest.raises(WorkerLost, match="answered 500 \\(no cgroup\\)"):
        factory("socket")(1)
    names = [c[0] for c in api.calls]
    assert names.index("start") < names.index("remove_container")


# --------------------------------------------------------------------------- images


def test_build_reports_the_engines_error_with_the_last_lines(monkeypatch):
    stream = [{"stream": "Step 1/3 : FROM base\n"}, {"stream": " ---> abc\n"},
              {"errorDetail": {"message": "COPY failed: no such file"}, "error": "COPY failed: no such file"}]  # fmt: skip
    api = FakeApi(build=[iter(stream)])
    fake_client(monkeypatch, api)
    with pytest.raises(SandboxError, match=r"docker build of t:1 failed: Step 1/3 : FROM base \| ---> abc \| COPY"):
        eng.build_image("/ctx", "t:1", {"BASE_IMAGE": "b"}, {"l": "v"})
    [(_, _, kw)] = api.calls
    assert kw["network_mode"] == "none" and kw["pull"] is False and kw["forcerm"] is True
    assert kw["buildargs"] == {"BASE_IMAGE": "b"} and kw["labels"] == {"l": "v"} and kw["tag"] == "t:1"
    assert "version" not in kw  # the legacy builder: RUN steps get no network

    fake_client(monkeypatch, FakeApi(build=[iter([{"stream": "Successfully built x\n"}])]))
    eng.build_image("/ctx", "t:1", {}, {})


def test_pull_and_import_report_errors(monkeypatch):
    fake_client(monkeypatch, FakeApi(pull=[iter([{"error": "dial tcp: lookup registry: no such host"}])]))
    with pytest.raises(SandboxError, match="docker pull python:3.12-slim failed: dial tcp"):
        eng.pull_image("python:3.12-slim")
    fake_client(monkeypatch, FakeApi(pull=[api_error(404, "manifest unknown", docker.errors.NotFound)]))
    with pytest.raises(SandboxError, match="not found \\(manifest unknown\\)"):
        eng.pull_image("python:3.12-slim")

    api = FakeApi(import_image=['{"status":"sha256:abc"}\r\n'])
    fake_client(monkeypatch, api)
    eng.import_tarball(Path("/x/root.tar"), "grpo-code-base-python:bookworm", ["LABEL k=v"])
    [(_, _, kw)] = api.calls
    assert kw == {"src": "/x/root.tar", "repository": "grpo-code-base-python", "tag": "bookworm",
                  "changes": ["LABEL k=v"]}  # fmt: skip
    fake_client(monkeypatch, FakeApi(import_image=['{"errorDetail":{"message":"bad tar"},"error":"bad tar"}']))
    with pytest.raises(SandboxError, match="docker import of /x/root.tar failed: bad tar"):
        eng.import_tarball("/x/root.tar", "n:t", [])


def test_no_docker_cli_subprocess_in_the_sandbox_backend():
    """Issue #19: the engine is driven through the SDK. (bench.py's baseline (c) times the
    `docker run` CLI on purpose; image.py keeps a subprocess for mmdebstrap only.)"""
    root = Path(db.__file__).parent
    for path in sorted(root.glob("*.py")):
        if path.name == "bench.py":
            continue
        text = path.read_text()
        assert not re.search(r"""\[\s*["']docker["']""", text), path.name
        assert not re.search(r"""["']docker["']\s*,\s*["'](run|rm|build|import|pull|rmi|ps|image|version|info)""",
                             text), path.name  # fmt: skip


# --------------------------------------------------------------------------- the attached channel


def frame(stream: int, data: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(data)) + data


def test_attached_channel_demultiplexes_stdout_and_relays_stdin(monkeypatch):
    removed: list[str] = []
    monkeypatch.setattr(db, "_remove_container", lambda name, *a, **k: removed.append(name))
    monkeypatch.setattr(eng, "client", lambda *a, **k: SimpleNamespace(
        api=SimpleNamespace(inspect_container=lambda cid: {"State": {"Running": False, "ExitCode": 3}})))  # fmt: skip
    host_end, engine_end = socket.socketpair()
    stdin_seen: list[bytes] = []

    def engine() -> None:  # the container's executor, as the engine's attach stream shows it
        engine_end.sendall(frame(2, b"warming up\n") + frame(1, b'{"ready": ') + frame(1, b"true}\n"))
        buf = b""
        while True:
            chunk = engine_end.recv(65536)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                stdin_seen.append(line)
                mid = json.loads(line)["id"]
                engine_end.sendall(frame(1, json.dumps({"id": mid, "pong": True}).encode() + b"\n"))
        engine_end.sendall(frame(2, b"bye\n"))
        engine_end.close()  # stdin closed: the executor exits

    thread = threading.Thread(target=engine, daemon=True)
    thread.start()
    worker = db._attach_worker("c1", "cid", host_end)
    assert worker.hello == {"ready": True}
    assert worker.ping() and worker.ping()
    assert [json.loads(x)["ping"] for x in stdin_seen] == [True, True]
    worker.close()
    thread.join(5)
    assert not thread.is_alive()  # end of input reached the container
    assert removed == ["c1"]
