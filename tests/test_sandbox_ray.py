"""The ray backend on a real two-node Ray cluster that this module starts and stops itself.

Both nodes run on this machine, bound to 127.0.0.1 (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``:
otherwise Ray rewrites loopback addresses to the machine's external one), with no
dashboard, usage stats off, one CPU and a small object store each. Each node's actor runs
a docker pool, so these tests also need the engine and the sandbox image. Skipped when Ray
is not installed (``pip install 'grpo-code[ray]'``; CI installs it).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import wait

import pytest
import sandbox_cases as cases
from typer.testing import CliRunner

from conftest import REPO
from grpo_code.cli import app
from grpo_code.config import SandboxConfig, load_config
from grpo_code.errors import ConfigError, SandboxError
from grpo_code.sandbox import Job, Limits, Sandbox, ScriptTest, Status, Verdict
from grpo_code.sandbox.bench import load_humaneval

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before ray is imported: loopback only
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'grpo-code[ray]')")

pytestmark = pytest.mark.docker
runner = CliRunner()
NODE = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024, "node_ip_address": "127.0.0.1"}


def outcome(result) -> tuple:
    """What must not depend on the backend: status, counts and per-test verdicts."""
    return result.status, result.passed, result.total, tuple(t.verdict for t in result.tests)


@pytest.fixture(scope="module")
def cluster(docker_ready):
    """A head node and a second node, each its own raylet and object store, on 127.0.0.1."""
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    ray_constants.ENABLE_RAY_CLUSTER = False  # in case ray was imported before this module
    temp_dir = tempfile.mkdtemp(prefix="grpo-ray-")  # short: Ray's unix socket paths must fit
    old_tmpdir = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = temp_dir  # Ray's address file goes to $RAY_TMPDIR/ray, not /tmp/ray
    os.makedirs(os.path.join(temp_dir, "ray"))
    c = Cluster(
        initialize_head=True,
        head_node_args={**NODE, "include_dashboard": False, "temp_dir": temp_dir},
    )
    c.add_node(**NODE)
    c.wait_for_nodes()
    ray.init(address=c.address, logging_level="WARNING")
    yield c
    ray.shutdown()
    c.shutdown()
    if old_tmpdir is None:
        os.environ.pop("RAY_TMPDIR", None)
    else:
        os.environ["RAY_TMPDIR"] = old_tmpdir
    shutil.rmtree(temp_dir, ignore_errors=True)


def ray_config(cluster, **ray_overrides) -> SandboxConfig:
    from grpo_code.config import RaySandboxConfig

    ray_cfg = RaySandboxConfig(address=cluster.address, **ray_overrides)
    return SandboxConfig(backend="ray", workers=1, timeout_s=5.0, memory_mb=256, ray=ray_cfg)


def numbered_jobs(n: int, sleep_s: float) -> list[Job]:
    """Jobs whose output names them, so a result handed to the wrong job would show."""
    return [
        Job(f"import time\ntime.sleep({sleep_s})\nN = {i}\n", (ScriptTest("print('job', N)"),))
        for i in range(n)
    ]


def check_numbered(results, n: int) -> None:
    assert len(results) == n
    for i, result in enumerate(results):
        assert result.status is Status.PASS, (i, result)
        assert result.tests[0].stdout == f"job {i}\n", (i, result.tests[0].stdout)


# --------------------------------------------------------------------------- before the cluster starts


def test_no_cluster_at_auto_is_one_error_line(tmp_path):
    """Runs before the cluster starts: `auto` also finds any running Ray on this machine."""
    from ray._private.services import find_gcs_addresses

    if find_gcs_addresses():
        pytest.skip("a Ray instance is running on this machine, so `auto` would find it")
    env = {**os.environ, "RAY_TMPDIR": str(tmp_path), "RAY_ADDRESS": ""}  # no cluster file to find
    job = tmp_path / "job.json"
    job.write_text(json.dumps(cases.MIXED.to_dict()))
    argv = [sys.executable, "-m", "grpo_code", "sandbox", "exec", str(job), "--backend", "ray"]
    out = subprocess.run(
        [*argv, "sandbox.ray.address=auto"], capture_output=True, text=True, cwd=REPO, env=env, timeout=120
    )
    assert out.returncode == 2, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cannot connect to the Ray cluster at 'auto'" in errors[0], out.stderr


PRIVATE_RAY = """
import os, subprocess
from grpo_code.config import SandboxConfig
from grpo_code.sandbox import Job, Sandbox, ScriptTest
with Sandbox(SandboxConfig(backend="ray", workers=1)) as sb:
    assert sb.run([Job("x = 1", (ScriptTest("assert x == 1"),))])[0].status.value == "pass"
    lines = subprocess.run(["ss", "-tanp"], capture_output=True, text=True, check=True).stdout.splitlines()
    names = ("raylet", "gcs_server", "ray::", f"pid={os.getpid()},")
    for line in lines:
        if any(n in line for n in names):
            print(line.split()[3], line.split()[4])
"""


def test_private_local_ray_uses_loopback_only(docker_ready):
    """sandbox.ray.address null: a private Ray whose every socket is on 127.0.0.1."""
    if shutil.which("ss") is None:
        pytest.skip("`ss` (iproute2) is not installed")
    temp_dir = tempfile.mkdtemp(prefix="grpo-ray-")  # short: Ray's unix socket paths must fit
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    try:
        out = subprocess.run(
            [sys.executable, "-c", PRIVATE_RAY],
            capture_output=True, text=True, env={**env, "RAY_TMPDIR": temp_dir}, timeout=180,
        )  # fmt: skip
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert out.returncode == 0, out.stderr[-2000:]
    pairs = [line.split() for line in out.stdout.splitlines()]
    assert pairs
    for local, peer in pairs:
        assert local.startswith(("127.", "[::ffff:127.")), (local, peer)
        assert peer.startswith(("127.", "[::ffff:127.", "*:", "0.0.0.0:*")), (local, peer)


# --------------------------------------------------------------------------- correctness


def test_ray_verdicts_equal_docker_on_humaneval_and_hacks(cluster, benchmarks):
    data = benchmarks / "humaneval" / "HumanEval.jsonl.gz"
    samples = load_humaneval(data)[:40] + load_humaneval(data, mismatched=True)[:40]
    # generous limits: only the backend may differ between the two runs, not the machine's load
    roomy = Limits(timeout_s=3.0, memory_mb=256)
    fixed = [
        dataclasses.replace(job, limits=roomy)
        for job in (cases.MIXED, cases.INDEPENDENT, cases.COMPILE_ERROR)
    ]
    jobs = [s.job(timeout_s=30.0) for s in samples] + fixed
    hacks = [job for job, _ in cases.HACKS.values()]
    with Sandbox(SandboxConfig(backend="docker", workers=2, timeout_s=5.0, memory_mb=256)) as sb:
        expected = sb.run(jobs)
    with Sandbox(ray_config(cluster)) as sb:
        got = sb.run(jobs + hacks)
        assert sb.backend == "ray" and len(sb.worker_names()) == 2  # one actor per node
        assert sb.stats["jobs"] == len(jobs + hacks) and sb.stats["actors_lost"] == 0
    differ = [
        (i, outcome(e), outcome(g)) for i, (e, g) in enumerate(zip(expected, got)) if outcome(e) != outcome(g)
    ]
    assert not differ, (differ, [(i, got[i].error) for i, _, _ in differ])
    assert [t.verdict.value for t in got[len(samples)].tests] == cases.MIXED_VERDICTS
    assert [t.verdict.value for t in got[len(samples) + 1].tests] == cases.INDEPENDENT_VERDICTS
    for sample, result in zip(samples, got):
        assert (result.status is Status.PASS) == sample.should_pass, (sample.task_id, result)
    for (name, (_, allowed)), result in zip(cases.HACKS.items(), got[len(jobs) :]):
        # on a loaded machine a runaway may reach the 1 s wall-clock limit before its own limit
        assert result.status is not Status.PASS, (name, result)
        assert result.tests[0].verdict in allowed | {Verdict.TIMEOUT}, (name, result)


def test_a_ray_sandbox_names_what_its_nodes_run(cluster):
    """Both nodes run this machine's docker image: the fingerprint is a docker pool's here."""
    config = ray_config(cluster)
    with Sandbox(dataclasses.replace(config, backend="docker")) as local:
        expected = local.fingerprint("python")
    with Sandbox(config) as sb:
        assert sb.fingerprint("python") == expected
        assert sb.fingerprint("cpp") != expected and sb.backend == "ray"


def test_backpressure_bounds_jobs_in_flight_per_actor(cluster):
    from grpo_code.sandbox.ray_backend import RayPool

    pool = RayPool(ray_config(cluster, max_inflight=2)).start()
    try:
        futures = [pool.submit(job) for job in numbered_jobs(12, 0.2)]
        peak = 0
        while not all(f.done() for f in futures):
            peak = max(peak, *(a["inflight"] for a in pool.actors()))
            time.sleep(0.02)
        assert 1 <= peak <= 2
        check_numbered([f.result() for f in futures], 12)
        actors = pool.actors()  # one per node, and both took work
        assert len({a["node_id"] for a in actors}) == 2 == len(actors)
        assert all(a["jobs"] > 0 for a in actors), actors
    finally:
        pool.shutdown()


def test_killing_an_actor_mid_batch_loses_no_result(cluster):
    from grpo_code.sandbox.ray_backend import RayPool

    pool = RayPool(ray_config(cluster)).start()
    try:
        futures = [pool.submit(job) for job in numbered_jobs(24, 0.3)]
        victim = None
        deadline = time.monotonic() + 60
        while victim is None and time.monotonic() < deadline:
            busy = [a for a in pool.actors() if a["inflight"] > 0 and a["jobs"] > 0]
            victim = busy[0] if busy else None
            time.sleep(0.05)
        assert victim is not None, pool.actors()
        os.kill(victim["pid"], signal.SIGKILL)
        done, not_done = wait(futures, timeout=120)
        assert not not_done
        check_numbered([f.result() for f in futures], 24)
        assert pool.stats["actors_lost"] == 1 and pool.stats["resubmitted"] >= 1, pool.stats
        assert pool.stats["jobs"] == 24 and pool.stats["infra_errors"] == 0, pool.stats
        # the node is alive, so the actor is replaced and takes work again
        deadline = time.monotonic() + 60
        while len(pool.actors()) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(pool.actors()) == 2 and victim["pid"] not in {a["pid"] for a in pool.actors()}
        check_numbered([pool.submit(job).result(timeout=60) for job in numbered_jobs(4, 0.0)], 4)
    finally:
        pool.shutdown()


# --------------------------------------------------------------------------- CLI and config


def test_cli_exec_and_bench_on_the_cluster(cluster, tmp_path, benchmarks):
    address = f"sandbox.ray.address={cluster.address}"
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps(cases.MIXED.to_dict()))
    result = runner.invoke(
        app, ["sandbox", "exec", str(job_file), "--backend", "ray", "--workers", "1", address]
    )
    assert result.exit_code == 0, result.output
    assert [t["verdict"] for t in json.loads(result.stdout)["tests"]] == cases.MIXED_VERDICTS

    data = benchmarks / "humaneval" / "HumanEval.jsonl.gz"
    args = ["sandbox", "bench", "--backend", "ray", "--json", "--details", "--data", str(data)]
    args += ["--limit", "24", "--repeat", "1", "--workers", "1", "--docker-run-samples", "2", address]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["backend"] == "ray" and report["samples"] == 24 and report["ours_per_s"] > 0
    assert report["wrong_verdicts"]["ours"] == 0
    assert len(report["details"]["ray_actors"]) == 2


def test_ray_config_keys_are_typed_and_validated():
    cfg = load_config(None, ["sandbox.backend=ray", "sandbox.ray.address=auto", "sandbox.ray.max_inflight=8"])
    assert (cfg.sandbox.backend, cfg.sandbox.ray.address, cfg.sandbox.ray.max_inflight) == ("ray", "auto", 8)
    assert cfg.sandbox.ray.actors is None and cfg.sandbox.ray.node_backend == "docker"
    with pytest.raises(ConfigError) as info:
        load_config(None, ["sandbox.ray.actors=0", "sandbox.ray.node_backend=ray", "sandbox.ray.adress=x"])
    text = str(info.value)
    for needle in (
        "sandbox.ray.actors: 0 is too small",
        "sandbox.ray.node_backend: 'ray'",
        "did you mean 'address'",
    ):
        assert needle in text


def test_missing_ray_is_a_user_error(monkeypatch):
    from grpo_code.sandbox import ray_backend

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(SandboxError, match=r"needs Ray.*grpo-code\[ray\]"):
        ray_backend.import_ray()


def test_actors_that_cannot_start_their_pool_are_one_error(cluster):
    from grpo_code.sandbox.ray_backend import RayPool

    config = ray_config(cluster)
    config.image = "grpo-code-no-such-image:latest"
    with pytest.raises(SandboxError, match=r"no Ray sandbox actor started .*no-such-image.* not found"):
        RayPool(config).start()


# --------------------------------------------------------------------------- network, node loss


def test_ray_uses_loopback_only(cluster):
    """Every TCP socket of this module's Ray processes is on 127.0.0.1 (the network rule)."""
    if shutil.which("ss") is None:
        pytest.skip("`ss` (iproute2) is not installed")
    lines = subprocess.run(["ss", "-tanp"], capture_output=True, text=True, check=True).stdout.splitlines()
    names = ("raylet", "gcs_server", "ray::", f"pid={os.getpid()},")  # and this driver
    ours = [line for line in lines if any(p in line for p in names)]
    assert ours
    for line in ours:
        local, peer = line.split()[3:5]
        for addr in (local, peer):
            host = addr.rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:")
            assert host in ("127.0.0.1", "*", "0.0.0.0") or host.startswith("127."), line
        assert not local.startswith(("0.0.0.0:", "*:", "[::]:")), f"listens on all interfaces: {line}"


def test_losing_a_node_mid_batch_loses_no_result(cluster):
    """Runs last: it removes the second node for good."""
    from grpo_code.sandbox.ray_backend import RayPool

    pool = RayPool(ray_config(cluster)).start()
    try:
        futures = [pool.submit(job) for job in numbered_jobs(20, 0.3)]
        second = next(n for n in cluster.worker_nodes)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            on_second = [a for a in pool.actors() if a["node_id"] == second.node_id]
            if on_second and on_second[0]["inflight"] > 0 and on_second[0]["jobs"] > 0:
                break
            time.sleep(0.05)
        cluster.remove_node(second, allow_graceful=False)
        done, not_done = wait(futures, timeout=180)
        assert not not_done
        check_numbered([f.result() for f in futures], 20)
        assert pool.stats["actors_lost"] == 1 and pool.stats["infra_errors"] == 0, pool.stats
        assert [a["node_id"] for a in pool.actors()] == [cluster.head_node.node_id]
    finally:
        pool.shutdown()
