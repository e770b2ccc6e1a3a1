"""``grpo-code sandbox serve``: SandboxFusion's /run_code field for field, our /v1/jobs,
the answers a service owes its clients (4xx naming the field, 413, 429, 401), /metrics,
and a real server on loopback that finishes its in-flight request on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import Future
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from conftest import free_port
from grpo_code.config import SandboxConfig
from grpo_code.errors import GrpoCodeError, SandboxError
from grpo_code.sandbox import Sandbox
from grpo_code.serve import read_token
from grpo_code.serve.app import ServeSettings, Service

ECHO = "import sys\nx = int(input())\nprint(x * 2)\nprint('note', file=sys.stderr)\n"


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(backend="local", workers=2)) as sb:
        yield sb


def client(sandbox, **settings) -> TestClient:
    lines: list[str] = []
    service = Service(sandbox, ServeSettings(log=lines.append, **settings))
    c = TestClient(service.app())
    c.lines = lines  # type: ignore[attr-defined]
    c.service = service  # type: ignore[attr-defined]
    return c


def run(c: TestClient, **body) -> dict:
    response = c.post("/run_code", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def test_run_code_answers_in_sandbox_fusions_fields(sandbox) -> None:
    c = client(sandbox)
    assert c.get("/v1/ping").json() == "pong"
    out = run(c, code=ECHO, language="python", stdin="21\n", run_timeout=5, compile_timeout=5,
              memory_limit_MB=-1, files={}, fetch_files=[])
    assert set(out) == {"status", "message", "compile_result", "run_result", "executor_pod_name", "files"}
    assert out["status"] == "Success" and out["compile_result"] is None and out["files"] == {}
    assert set(out["run_result"]) == {"status", "execution_time", "return_code", "stdout", "stderr"}
    assert out["run_result"]["stdout"] == "42\n" and out["run_result"]["stderr"] == "note\n"
    assert out["run_result"]["status"] == "Finished" and out["run_result"]["return_code"] == 0

    raised = run(c, code="raise ValueError('boom')")
    assert raised["status"] == "Failed" and raised["run_result"]["return_code"] == 1
    assert "ValueError: boom" in raised["run_result"]["stderr"]
    assert run(c, code="import sys\nprint('a')\nsys.exit(3)")["run_result"]["return_code"] == 3
    slow = run(c, code="while True:\n    pass\n", run_timeout=1)
    assert slow["status"] == "Failed" and slow["run_result"]["status"] == "TimeLimitExceeded"
    syntax = run(c, code="def (")
    assert syntax["run_result"]["return_code"] == 1 and "SyntaxError" in syntax["run_result"]["stderr"]


def test_run_code_compiles_cpp_and_reports_a_compile_error(sandbox) -> None:
    c = client(sandbox)
    ok = run(c, language="cpp", stdin="4", code="#include <cstdio>\nint main(){int x; scanf(\"%d\", &x); "
                                                "printf(\"%d\\n\", x + 1); return 0;}\n")
    assert ok["status"] == "Success" and ok["compile_result"]["return_code"] == 0
    assert ok["run_result"]["stdout"] == "5\n"
    bad = run(c, language="cpp", code="int main() { return 0 }\n")
    assert bad["status"] == "Failed" and bad["run_result"] is None
    assert bad["compile_result"]["return_code"] == 1 and "error" in bad["compile_result"]["stderr"]
    js = run(c, language="nodejs", stdin="20\n",
             code="const x = Number(require('fs').readFileSync(0, 'utf8'));\nconsole.log(x + 1);\n")
    assert js["status"] == "Success" and js["compile_result"] is None and js["run_result"]["stdout"] == "21\n"


@pytest.mark.parametrize("body, status, field", [
    ({"language": "python"}, 422, "code"),
    ({"code": 3}, 422, "code"),
    ({"code": "print(1)", "language": "cobol"}, 422, "language"),
    ({"code": "print(1)", "run_timeout": -1}, 422, "run_timeout"),
    ({"code": "print(1)", "compile_timeout": 10_000}, 422, "compile_timeout"),
    ({"code": "print(1)", "memory_limit_MB": 10**9}, 422, "memory_limit_MB"),
    ({"code": "print(1)", "files": {"a.txt": "aGk="}}, 422, "files"),
    ({"code": "print(1)", "stdin": ["x"]}, 422, "stdin"),
    ({"code": "print(1)", "shell": True}, 422, "shell"),
    (["not", "an", "object"], 422, "body"),
])
def test_bad_input_gets_a_4xx_naming_the_field_and_the_service_keeps_serving(sandbox, body, status, field) -> None:
    c = client(sandbox)
    response = c.post("/run_code", json=body)
    assert response.status_code == status and response.json()["field"] == field, response.text
    assert run(c, code="print(1)")["status"] == "Success"


def test_bad_json_a_body_over_the_limit_and_a_full_queue(sandbox) -> None:
    c = client(sandbox, max_body_bytes=1000, queue=2)
    assert c.post("/run_code", content=b"{not json").status_code == 400
    big = c.post("/run_code", json={"code": "x = 1\n" * 400})
    assert big.status_code == 413 and big.json()["field"] == "body"
    c.service._depth = 2  # two jobs already waiting or running
    full = c.post("/run_code", json={"code": "print(1)"})
    assert full.status_code == 429 and full.headers["retry-after"] == "1"
    assert c.post("/v1/jobs", json=[{"program": "x = 1", "tests": [{"kind": "script", "code": "pass"}]}]
                  ).status_code == 429
    c.service._depth = 0
    assert run(c, code="print(1)")["status"] == "Success"
    metrics = c.get("/metrics").text
    assert 'grpo_code_requests_total{endpoint="run_code",status="429"} 1' in metrics
    assert 'grpo_code_requests_total{endpoint="run_code",status="413"} 1' in metrics
    assert "grpo_code_queue_depth 0" in metrics and 'grpo_code_verdicts_total{verdict="pass"} 1' in metrics
    assert "grpo_code_request_seconds_count 5" in metrics
    assert [line.split()[1:4] for line in c.lines] == [  # one access-log line per request
        ["POST", "/run_code", "400"], ["POST", "/run_code", "413"], ["POST", "/run_code", "429"],
        ["POST", "/v1/jobs", "429"], ["POST", "/run_code", "200"], ["GET", "/metrics", "200"]]


def test_native_jobs_and_fingerprint(sandbox) -> None:
    c = client(sandbox)
    job = {"program": "def f(x):\n    return x + 1\n", "tests": [{"kind": "call", "fn": "f", "args": [1], "expected": 2}],
           "entry_point": "f"}
    one = c.post("/v1/jobs", json=job).json()
    assert one["status"] == "pass" and one["tests"][0]["verdict"] == "pass"
    both = c.post("/v1/jobs", json=[job, {**job, "program": "def f(x):\n    return x\n"}]).json()
    assert [r["status"] for r in both] == ["pass", "fail"]
    bad = c.post("/v1/jobs", json={"program": "x", "tests": "nope"})
    assert bad.status_code == 422 and bad.json()["field"] == "job"
    assert c.get("/v1/fingerprint?language=python").json()["fingerprint"] == sandbox.fingerprint("python")


class GoneSandbox:
    """A sandbox that went away under every job."""

    config = SandboxConfig(backend="local")

    def submit(self, job) -> Future:  # noqa: ANN001
        done: Future = Future()
        done.set_exception(SandboxError("the sandbox was shut down", "create a new Sandbox"))
        return done


def test_a_lost_job_is_a_sandbox_error_never_a_verdict() -> None:
    out = run(client(GoneSandbox()), code="print(1)")
    assert out["status"] == "SandboxError" and "shut down" in out["message"] and out["run_result"] is None


def test_a_token_guards_every_endpoint_but_ping(sandbox, tmp_path: Path) -> None:
    secret = "s3cret-token-0123456789"
    c = client(sandbox, token=secret)
    assert c.get("/v1/ping").status_code == 200
    assert c.post("/run_code", json={"code": "print(1)"}).status_code == 401
    assert c.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    ok = c.post("/run_code", json={"code": "print(1)"}, headers={"Authorization": f"Bearer {secret}"})
    assert ok.status_code == 200 and ok.json()["status"] == "Success"
    with pytest.raises(GrpoCodeError, match="not loopback"):
        read_token("0.0.0.0", None)
    assert read_token("127.0.0.1", None) is None and read_token("::1", None) is None
    short = tmp_path / "short"
    short.write_text("abc\n")
    with pytest.raises(GrpoCodeError, match="at least 16"):
        read_token("0.0.0.0", short)
    good = tmp_path / "good"
    good.write_text(secret + "\n")
    assert read_token("0.0.0.0", good) == secret


def test_the_server_listens_on_loopback_and_finishes_in_flight_requests_on_sigterm() -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", "from grpo_code.cli import main; main()", "sandbox", "serve", "--backend", "local",
                             "--port", str(port), "sandbox.workers=1"],
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            lines.append(line)
            if "listening on" in line:
                break
        assert f"listening on http://127.0.0.1:{port}" in "".join(lines), "".join(lines)
        answer: dict = {}

        def slow() -> None:
            body = json.dumps({"code": "import time\ntime.sleep(2)\nprint('done')", "run_timeout": 5}).encode()
            request = urllib.request.Request(f"http://127.0.0.1:{port}/run_code", body,
                                             {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=60) as r:
                answer.update(json.loads(r.read()))

        thread = threading.Thread(target=slow)
        thread.start()
        time.sleep(0.7)  # the request is in flight
        proc.send_signal(signal.SIGTERM)
        thread.join(60)
        assert answer.get("status") == "Success" and answer["run_result"]["stdout"] == "done\n"
        assert proc.wait(60) == 128 + signal.SIGTERM  # the conventional status of a SIGTERM'd service
        rest = proc.stderr.read()
        assert "stopped" in rest
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/ping", timeout=2)
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture()
def server(sandbox):
    """A server on loopback, in this process, over the local sandbox."""
    import uvicorn

    port = free_port()
    service = Service(sandbox, ServeSettings(log=lambda line: None, token="t0ken-for-the-http-backend"))
    srv = uvicorn.Server(uvicorn.Config(service.app(), host="127.0.0.1", port=port, log_level="warning",
                                        lifespan="off"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(30)


def test_the_http_backend_runs_train_eval_and_check_jobs_on_a_server(sandbox, server, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from grpo_code.cli import app

    token = tmp_path / "token"
    token.write_text("t0ken-for-the-http-backend\n")
    remote = Sandbox(SandboxConfig(backend="http", url=server, token_file=str(token), workers=2))
    with remote:
        assert remote.fingerprint("python") == "http:" + sandbox.fingerprint("python")
        job = {"program": "def f(x):\n    return x + 1\n", "entry_point": "f",
               "tests": [{"kind": "call", "fn": "f", "args": [1], "expected": 2}]}
        results = remote.run([job, {**job, "program": "def f(x):\n    while True:\n        pass\n",
                                    "limits": {"timeout_s": 1}}])
        assert [r.status.value for r in results] == ["pass", "fail"]
        assert results[1].tests[0].verdict.value == "timeout"
    # The CLI's sandbox settings reach the server: tasks check on the demo suite's references.
    result = CliRunner().invoke(app, ["tasks", "check", "demo", "--solutions", "reference", "--json",
                                      "sandbox.backend=http", f"sandbox.url={server}", f"sandbox.token_file={token}"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["reference"]["passed"] == report["reference"]["checked"] > 0
    # A server that does not answer is the sandbox's failure, never a verdict.
    with Sandbox(SandboxConfig(backend="http", url=f"http://127.0.0.1:{free_port()}")) as gone:
        with pytest.raises(SandboxError, match="sandbox server"):
            gone.submit(job).result(timeout=120)


ODD_VALUES = [None, True, 0, -1, 1.5, float("inf"), "", "x", [], {}, [None], {"": None}, [[[[]]]],
              {"$t": 1}, {"$i": "zz"}, "\ud800"]


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def _odd_bodies() -> list[tuple[str, object]]:
    """Malformed requests of many shapes: every field of a valid request replaced by values
    of other types, and the bodies as a whole."""
    run_code = {"code": "print(1)", "language": "python", "stdin": "", "run_timeout": 5, "memory_limit_MB": -1,
                "compile_timeout": 5, "files": {}, "fetch_files": []}
    job = {"program": "def f(x):\n    return x\n", "language": "python", "limits": {"timeout_s": 2},
           "tests": [{"kind": "call", "fn": "f", "args": [1], "expected": 1},
                     {"kind": "io", "stdin": "", "stdout": ""}, {"kind": "script", "code": "pass"}]}
    bodies: list[tuple[str, object]] = []
    for value in ODD_VALUES:
        bodies += [("/run_code", value), ("/v1/jobs", value), ("/v1/jobs", [value])]
        bodies += [("/run_code", {**run_code, key: value}) for key in run_code]
        bodies += [("/v1/jobs", {**job, key: value}) for key in job]
        bodies += [("/v1/jobs", {**job, "limits": {"timeout_s": value}})]
        for i, test in enumerate(job["tests"]):
            for key in test:
                tests = list(job["tests"])
                tests[i] = {**test, key: value}
                bodies.append(("/v1/jobs", {**job, "tests": tests}))
    return bodies


def test_malformed_json_of_any_shape_is_a_4xx_and_the_service_keeps_serving(sandbox) -> None:
    c = client(sandbox)
    for path in ("/run_code", "/v1/jobs"):
        for depth in (100, 1000, 100_000):  # nested past any parser's recursion limit
            response = c.post(path, content=_nested(depth))
            assert 400 <= response.status_code < 500, (path, depth, response.text)
        nested_args = b'{"program": "def f(x):\\n    return 1\\n", "tests": [{"kind": "call", "fn": "f", "args": [' + \
            _nested(50_000) + b'], "expected": 1}]}'
        assert 400 <= c.post("/v1/jobs", content=nested_args).status_code < 500
    for path, body in _odd_bodies():
        data = json.dumps(body, allow_nan=True).encode("utf-8", "surrogatepass")
        response = c.post(path, content=data)
        assert response.status_code == 200 or 400 <= response.status_code < 500, (path, body, response.text)
    assert run(c, code="print(1)")["status"] == "Success"


def test_what_a_run_code_program_prints_is_bounded() -> None:
    # /run_code runs the program as a record job: its stdout is the answer, kept whole up to
    # record_output_kb (sandbox serve --max-output-kb), past it a Failed run. 64 MiB of
    # invalid UTF-8 once made a 396 MB result.
    with Sandbox(SandboxConfig(backend="local", workers=1, record_output_kb=64)) as sb:
        c = client(sb)
        ok = run(c, code="print('x' * 60000)")
        assert ok["status"] == "Success" and len(ok["run_result"]["stdout"]) == 60001
        flood = c.post("/run_code", json={"code": "import os\nfor _ in range(64):\n    os.write(1, b'\\xff' * (1 << 20))\n"})
        assert flood.status_code == 200 and len(flood.content) < 400_000, len(flood.content)
        out = flood.json()
        assert out["status"] == "Failed" and out["run_result"]["return_code"] == 1, out["run_result"]
