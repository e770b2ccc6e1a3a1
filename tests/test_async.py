"""Rollouts ahead of the update (``train.max_staleness``): the lookahead sampler, the bound,
no batch dropped, the worker following pushed weights, a dead worker failing the run, and
(with vLLM's CPU build and Docker) a training run that is interrupted and resumed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from grpo_code.config import load_config
from grpo_code.errors import ConfigError
from grpo_code.generation.stream import END, Sample
from grpo_code.training import ahead, worker_link
from grpo_code.training.ahead import AheadEngine, AheadRollouts, LookaheadSampler, split_cores
from grpo_code.training.engine_worker import BatchDone
from grpo_code.training.rollouts import PromptIndex


class Repeat:
    """A sampler like TRL's: each epoch a new order of ``n`` indices, each given ``g`` times."""

    def __init__(self, n: int, g: int):
        self.n, self.g, self.epoch = n, g, 0

    def __iter__(self):
        self.epoch += 1
        order = list(range(self.n))[self.epoch % self.n:] + list(range(self.n))[:self.epoch % self.n]
        for i in order:
            yield from [i] * self.g

    def __len__(self) -> int:
        return self.n * self.g


def test_the_lookahead_sampler_reads_ahead_what_the_trainer_draws_later_across_epochs() -> None:
    plain = Repeat(3, 2)
    expected = [i for _ in range(3) for i in plain]
    sampler = LookaheadSampler(Repeat(3, 2))
    ahead_of_time = sampler.at(4, 8)  # batches the trainer has not drawn, into the next epochs
    drawn = [i for _ in range(3) for i in sampler]  # three epochs, as the trainer iterates them
    assert drawn == expected
    assert ahead_of_time == expected[4:12]
    assert len(sampler) == 6


def test_cores_split_between_the_trainer_and_the_engine() -> None:
    assert split_cores([0, 1]) == ([0], [1])
    assert split_cores([3, 0, 2, 1]) == ([0, 1], [2, 3])
    assert split_cores([5]) == ([5], [5])


def test_max_staleness_needs_a_vllm_engine_and_single_turn_rollouts() -> None:
    with pytest.raises(ConfigError, match="train.max_staleness: 2 needs generation.backend: vllm"):
        load_config(None, ["generation.backend=hf", "train.max_staleness=2"])
    with pytest.raises(ConfigError, match="no vLLM server"):
        load_config(None, ["generation.backend=vllm", "generation.vllm_mode=server", "train.max_staleness=1"])
    with pytest.raises(ConfigError, match="single-turn"):
        load_config(None, ["generation.backend=vllm", "train.max_staleness=1", "train.multi_turn.turns=2"])
    with pytest.raises(ConfigError, match="max_staleness"):
        load_config(None, ["generation.backend=vllm", "train.max_staleness=-1"])


def test_max_staleness_0_is_the_synchronous_run_exactly(tmp_path: Path) -> None:
    """0 (the default) starts no worker and hands TRL the same settings: the same updates."""
    from grpo_code.train import grpo_args

    base = load_config(None, ["generation.backend=vllm"])
    zero = load_config(None, ["generation.backend=vllm", "train.max_staleness=0"])
    assert grpo_args(base, tmp_path).to_dict() == grpo_args(zero, tmp_path).to_dict()
    one = grpo_args(load_config(None, ["generation.backend=vllm", "train.max_staleness=1"]), tmp_path)
    assert not one.use_vllm and one.vllm_importance_sampling_mode == "token_truncate"


# ----------------------------------------------------------------- the rollout function, on a fake worker


class FakeWorker:
    """The worker's interface with batches that take ``seconds[batch]`` to generate, on a
    thread; each batch records the version it was started with."""

    def __init__(self, seconds: dict[int, float]):
        self.seconds = seconds
        self.version = 0
        self.asked: dict[int, tuple] = {}
        self.done: dict[int, Any] = {}
        self.lock = threading.Condition()

    def requested(self, batch: int) -> bool:
        return batch in self.asked

    def take_loads(self) -> list:
        return []

    def request(self, batch: int, ids: list, task_ids: list, seed: int, min_version: int, score: bool = True) -> None:
        self.asked[batch] = (ids, task_ids, seed, min_version)

        def run() -> None:
            with self.lock:
                while self.version < min_version:
                    self.lock.wait()
                version = self.version
            time.sleep(self.seconds.get(batch, 0.0))
            rows = {r: (Sample([7, r], END, [-0.5, -0.5]), 0.1) for r in range(len(ids))}
            with self.lock:
                self.done[batch] = worker_link._Batch(list(task_ids), rows, {}, BatchDone(batch, version, 0.1, 0.0))
                self.lock.notify_all()

        threading.Thread(target=run, daemon=True).start()

    def finished(self) -> int:
        return len(self.done)

    def is_done(self, batch: int) -> bool:
        with self.lock:
            return batch in self.done

    def take(self, batch: int) -> Any:
        with self.lock:
            while batch not in self.done:
                self.lock.wait()
            return self.done.pop(batch)

    def load(self, version: int) -> None:
        with self.lock:
            self.version = version
            self.lock.notify_all()


class FakeTrainer:
    def __init__(self, tokenizer: Any):
        from types import SimpleNamespace

        self.processing_class = tokenizer
        self.num_iterations = 1
        self.args = SimpleNamespace(generation_batch_size=4, steps_per_generation=1, gradient_accumulation_steps=1,
                                    seed=0)
        self.state = SimpleNamespace(global_step=0)


class Tokens:
    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return " ".join(map(str, ids))

    def apply_chat_template(self, messages: Any, **kwargs: Any) -> list[int]:
        return [len(messages[0]["content"])]


def test_slow_batches_reach_the_update_in_order_within_the_bound_and_none_is_dropped(monkeypatch) -> None:
    """Batch 1 holds a slow task and takes far longer than the others: the trainer waits for
    it (it is never skipped or replaced), every batch is taken once, in order, and each was
    sampled at most ``max_staleness`` versions behind the step that trains on it."""
    monkeypatch.setattr(ahead, "prompt_ids", lambda tokenizer, prompt: [len(prompt.messages[0]["content"])])
    rows = [{"prompt": [{"role": "user", "content": f"task {i}" + " slow" * (i == 1)}], "task_id": f"t{i}"}
            for i in range(3)]
    worker = FakeWorker({1: 1.0})
    engine = AheadEngine(worker, [])
    sampler = engine.wrap_sampler(Repeat(3, 4))  # a batch: one prompt's group of 4
    trainer = FakeTrainer(Tokens())
    rollouts = AheadRollouts(PromptIndex(rows), rows, engine, max_staleness=2)
    order = (i for _ in range(3) for i in sampler)  # epochs, as the trainer draws them
    seen = []
    for step in range(6):
        trainer.state.global_step = step
        worker.load(step)  # the update of the previous step, pushed
        prompts = [rows[next(order)]["prompt"] for _ in range(4)]
        out = rollouts(prompts, trainer)
        records = out["rollout"]
        assert len({r.version for r in records}) == 1  # a group from one version
        assert 0 <= step - records[0].version <= 2
        seen.append(records[0].task_id)
        assert out["rollout_batch"].metrics["async/staleness"] == step - records[0].version
    assert sorted(worker.asked) == list(range(8))  # asked up to 2 ahead of the last step
    assert seen == [rows[i]["task_id"] for i in LookaheadSampler(Repeat(3, 4)).at(0, 24)[::4]]
    assert "t1" in seen and sum(rollouts.staleness_counts.values()) == 6


def test_held_out_rows_go_to_the_worker_between_batches_and_record_the_version_that_sampled_them(
        monkeypatch) -> None:
    """``train.eval_every=2`` ahead of the update: at step 2 the held-out rows are queued on
    the worker as a batch of their own (numbered below zero, not scored as training rows,
    asked for version 2), the trainer never waits for them, a later call hands them to the
    eval, whose point records the version the worker sampled with."""
    from types import SimpleNamespace

    from grpo_code.training.held_out import HeldOut

    monkeypatch.setattr(ahead, "prompt_ids", lambda tokenizer, prompt: [len(prompt.messages[0]["content"])])
    rows = [{"prompt": [{"role": "user", "content": f"task {i}"}], "task_id": f"t{i}"} for i in range(2)]
    worker = FakeWorker({-1: 0.3})  # the held-out batch takes a while
    engine = AheadEngine(worker, [])
    sampler = engine.wrap_sampler(Repeat(2, 4))
    written = []

    class Verifier:
        def task(self, task_id):  # noqa: ANN001, ANN201
            return SimpleNamespace(id=task_id)

        def submit(self, task, text, style, truncated=False):  # noqa: ANN001, ANN201
            return SimpleNamespace(task_id=task.id)

        def judge(self, handles):  # noqa: ANN001, ANN201
            return [SimpleNamespace(task_id=h.task_id, masked=False, passed=True) for h in handles]

    held = HeldOut(2, ["h/a"], [[9]], 3, Verifier(), "chat", 0, Tokens(), written.append)
    rollouts = AheadRollouts(PromptIndex(rows), rows, engine, max_staleness=1, held_out=held)
    trainer = FakeTrainer(Tokens())
    order = (i for _ in range(4) for i in sampler)
    for step in range(4):
        trainer.state.global_step = step
        worker.load(step)
        rollouts([rows[next(order)]["prompt"] for _ in range(4)], trainer)
        if step == 2:
            ids, task_ids, _, min_version = worker.asked[-1]
            assert (ids, task_ids, min_version) == ([[9]] * 3, ["h/a"] * 3, 2)
            assert not written  # the step did not wait for them
    [point] = held.wait()
    assert point.version >= 2 and point.pass_at_1 == 1.0 and written == [point]
    assert sorted(b for b in worker.asked if b < 0) == [-1]


def test_a_batch_that_is_not_the_one_asked_for_is_a_loud_error(monkeypatch) -> None:
    monkeypatch.setattr(ahead, "prompt_ids", lambda tokenizer, prompt: [1])
    rows = [{"prompt": [{"role": "user", "content": f"task {i}"}], "task_id": f"t{i}"} for i in range(2)]

    def started() -> tuple[AheadRollouts, FakeTrainer, Any]:
        engine = AheadEngine(FakeWorker({}), [])
        sampler = engine.wrap_sampler(Repeat(2, 4))
        return AheadRollouts(PromptIndex(rows), rows, engine, max_staleness=1), FakeTrainer(Tokens()), iter(sampler)

    rollouts, trainer, order = started()
    drawn = [next(order) for _ in range(4)]
    with pytest.raises(RuntimeError, match="not among the prompts its sampler drew"):
        rollouts([rows[1 - drawn[0]]["prompt"]] * 4, trainer)
    rollouts, trainer, order = started()
    rollouts([rows[next(order)]["prompt"] for _ in range(4)], trainer)
    trainer.state.global_step = 1
    drawn = [next(order) for _ in range(4)]
    with pytest.raises(RuntimeError, match="not the one the rollout worker was asked for"):
        rollouts([rows[1 - drawn[0]]["prompt"]] * 4, trainer)


def test_the_clipped_share_counts_ratios_outside_the_caps() -> None:
    import torch

    from grpo_code.training.trl_seam import clipped_share

    old = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    sampled = torch.tensor([[-2.0, 0.0, 0.0], [0.0, 0.0, -9.0]])  # ratios e^2 (> 3) and 1; the -9 is padding
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    out = {"old_per_token_logps": old, "sampling_per_token_logps": sampled, "completion_mask": mask}
    assert clipped_share(out, "token_truncate", None, 3.0) == pytest.approx(1 / 5)
    assert clipped_share(out, "sequence_mask", None, 3.0) == pytest.approx(1 / 2)
    assert clipped_share(out, "token_truncate", None, 10.0) == 0.0


def test_a_lora_policy_is_pushed_merged_and_gives_the_adapted_model_s_log_probs(tiny_model_dir: Path) -> None:
    """What the worker loads for a LoRA policy: the adapter merged into the base weights,
    named as the base checkpoint, read while merged (the merge is undone in place after)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_code.training.worker_link import checkpoint_weights, probe_gap, probe_ids, probe_logps

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32),
                           LoraConfig(task_type="CAUSAL_LM", r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.add_(torch.randn_like(p) * 0.1)  # an adapter that changes the outputs
    ids = probe_ids(tokenizer)
    adapted = probe_logps(model, ids, 1.0)
    with checkpoint_weights(model) as weights:
        plain = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
        assert set(weights) == set(plain.state_dict())
        plain.load_state_dict({k: v.clone() for k, v in weights.items()})
    assert probe_gap(adapted, probe_logps(plain, ids, 1.0)) < 1e-4
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    assert probe_gap(adapted, probe_logps(base, ids, 1.0)) > 1e-2  # the adapter mattered
    assert probe_gap(adapted, probe_logps(model, ids, 1.0)) < 1e-4  # and is unmerged again


# ----------------------------------------------------------------- a real worker (vLLM's CPU build)


@pytest.mark.vllm
def test_the_worker_s_engine_follows_pushed_weights_and_a_dead_worker_fails_fast(tiny_vllm_model_dir: Path) -> None:
    """The engine's log-probs of the probe text match the trainer's after each push (and do
    not when the pushed file holds other weights); a killed worker fails the next wait with
    one error, at once."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_code.generation.base import Sampling
    from grpo_code.generation.vllm import prepare_environment
    from grpo_code.training.engine_worker import WorkerSpec
    from grpo_code.training.worker_link import (
        EngineWorker,
        RolloutWorkerError,
        probe_gap,
        probe_ids,
        probe_logps,
    )

    prepare_environment()
    tokenizer = AutoTokenizer.from_pretrained(tiny_vllm_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_vllm_model_dir, dtype=torch.float32)
    probe = probe_ids(tokenizer)
    spec = WorkerSpec(str(tiny_vllm_model_dir), str(tiny_vllm_model_dir), "float32",
                      Sampling(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=16), 256, 64 << 20, probe, [])
    worker = EngineWorker(spec, tokenizer, None, initial_version=0)
    try:
        engine_v0 = worker.wait_ready()
        trainer_v0 = probe_logps(model, probe, 1.0)
        assert probe_gap(trainer_v0, engine_v0) < 1e-4

        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1.5)
        worker.push(1, model, probe_logps(model, probe, 1.0))
        ids = [tokenizer("Write add.")["input_ids"]] * 3
        worker.request(0, ids, [None] * 3, 5, min_version=1)  # waits for version 1
        batch = worker.take(0)
        assert batch.done.version == 1 and len(batch.rows) == 3
        assert all(s.logprobs and len(s.logprobs) == len(s.ids) for s, _ in batch.rows.values())
        [load] = worker.take_loads()
        assert load.version == 1 and load.load_s > 0 and load.probe_gap < 1e-4
        assert probe_gap(trainer_v0, load.probe) > 1e-2  # the weights did change

        # A file that holds other weights than the trainer's: the check sees it.
        stale = AutoModelForCausalLM.from_pretrained(tiny_vllm_model_dir, dtype=torch.float32)
        worker.push(2, stale, probe_logps(model, probe, 1.0))
        worker.request(1, ids, [None] * 3, 5, min_version=2)
        worker.take(1)
        [load] = worker.take_loads()
        assert load.version == 2 and load.probe_gap > 1e-2

        os.kill(worker.process.pid, signal.SIGKILL)
        worker.request(2, ids, [None] * 3, 5, min_version=2)
        started = time.monotonic()
        with pytest.raises(RolloutWorkerError, match="exited"):
            worker.take(2)
        assert time.monotonic() - started < 15
    finally:
        worker.close()
    assert not worker.process.is_alive()
    assert not worker.weights_dir.exists()


# ----------------------------------------------------------------- a training run


def _marked(mark: str) -> list[int]:
    """Processes whose environment carries ``mark`` (the run's and its worker's)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if mark.encode() in (proc / "environ").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def _containers(pid: int) -> int:
    """Sandbox containers owned by process ``pid``."""
    from grpo_code.sandbox import docker_backend

    return sum(1 for _, owner in docker_backend.list_containers() if owner.split(":")[1:2] == [str(pid)])


@pytest.mark.vllm
@pytest.mark.docker
def test_training_ahead_of_the_update_stays_within_the_bound_stops_cleanly_and_resumes(
        tiny_vllm_model_dir: Path, docker_ready: None, tmp_path: Path) -> None:
    """Three steps on vLLM's CPU build with ``max_staleness: 1``: SIGTERM after step 2 stops
    the trainer and its worker (no process, no container left); ``--resume`` restarts the
    worker from checkpoint 2's weights and trains step 3. Each batch is at most one version
    old, versions advance, and the engine's log-probs follow every pushed version."""
    run = tmp_path / "run"
    mark = f"GRPO_CODE_TEST_MARK={uuid.uuid4().hex}"
    env = {**os.environ, mark.split("=")[0]: mark.split("=")[1]}
    code = "import sys; from grpo_code.cli import main; sys.argv[0] = 'grpo-code'; main()"
    common = ["generation.backend=vllm", "train.max_staleness=1", "train.trl.max_steps=3",
              "train.trl.per_device_train_batch_size=8", "train.trl.num_generations=4", "train.trl.save_steps=1",
              "train.trl.learning_rate=1e-3", "generation.max_new_tokens=48", "generation.temperature=1.0",
              "tasks.train_split=1-4", "train.seed=1", "train.stop_after_code=true", "sandbox.backend=docker",
              "sandbox.workers=2", f"model.name={tiny_vllm_model_dir}", f"output.dir={run}",
              "generation.vllm_dtype=float32",  # the trainer's dtype: the probe's gap is the push's error alone
              "train.eval_every=2", "tasks.eval_split=5-6"]  # held-out rows on the worker, between batches
    first = subprocess.Popen([sys.executable, "-c", code, "train", *common], env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    while not (run / "checkpoint-2" / "trainer_state.json").is_file() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    first.send_signal(signal.SIGTERM)
    _, err = first.communicate(timeout=120)
    assert first.returncode == 130, err[-3000:]  # Ctrl-C's code: stopped as an interrupt
    assert "interrupted" in err
    time.sleep(1)
    assert _marked(mark) == [], "the trainer or its rollout worker outlived SIGTERM"
    assert _containers(first.pid) == 0, "the run's sandbox containers outlived SIGTERM"

    second = subprocess.run([sys.executable, "-c", code, "train", "--resume", str(run)], env=env, text=True,
                            capture_output=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "none dropped" in second.stderr
    assert _marked(mark) == []

    steps = {m["step"]: m for m in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "loss" in m}
    assert 3 in steps
    for m in steps.values():
        assert 0 <= m["async/staleness"] <= 1, m
        assert m["async/is_clipped_share"] >= 0
    # The resumed worker held no version until the trainer pushed checkpoint 2's weights, and
    # its engine matched the trainer on them.
    assert steps[3]["async/staleness"] == 0
    gaps = [m["async/probe_logp_gap"] for m in steps.values() if "async/probe_logp_gap" in m]
    assert gaps and max(gaps) < 1e-3, gaps
    rows = [json.loads(line) for line in (run / "completions.jsonl").read_text().splitlines()]
    versions = [(r["step"], r["version"]) for r in rows]
    assert all(0 <= step - version <= 1 for step, version in versions), versions
    assert max(v for _, v in versions) == 2 and [s for s, _ in versions][-1] == 2
    # Held-out eval: version 2, asked for by the step-3 call (the resumed run's), sampled on
    # the worker with version 2 or newer and written by the time the run ended.
    held = [m for m in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "eval/pass@1" in m]
    assert held and all(2 <= m["eval/policy_version"] <= 3 and m["eval/tasks"] == 2 for m in held), held
