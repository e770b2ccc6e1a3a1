"""Training's rollouts against eval: one decode loop, one seeding rule, one cut rule.

The same model, prompts, seed and settings give the same completions, the same "cut"
flags and the same verdicts through ``grpo-code eval``'s hf backend and through a
training rollout (the ``rollout_func`` TRL calls), and the records carry what the reward
function needs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from grpo_code.config import RewardsConfig, SandboxConfig
from grpo_code.generation.base import Sampling, resolve, seeded_chunks
from grpo_code.generation.hf import HFGenerator
from grpo_code.rewards.functions import build_reward_funcs, reward_verifier
from grpo_code.sandbox import Sandbox
from grpo_code.tasks import load_suite, render
from grpo_code.training.engines import TransformersEngine
from grpo_code.training.rollouts import PromptIndex, Rollouts, training_sampling, trl_prompt

N = 4
MAX_NEW = 48


def fake_trainer(model, tokenizer, sampling: Sampling):  # noqa: ANN001, ANN201
    """What a rollout reads of TRL's trainer, hf generation."""
    from accelerate import Accelerator

    args = SimpleNamespace(temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k,
                           max_completion_length=sampling.max_new_tokens, repetition_penalty=1.0, min_p=None,
                           generation_kwargs=None, seed=0, ds3_gather_for_generation=True)
    return SimpleNamespace(args=args, model_wrapped=model, accelerator=Accelerator(cpu=True),
                           processing_class=tokenizer, eos_token_ids=[tokenizer.eos_token_id], use_vllm=False,
                           state=SimpleNamespace(global_step=0))


def test_a_training_rollout_samples_and_judges_like_eval(tiny_model_dir: Path) -> None:
    tasks = load_suite("demo").split("1-4").tasks[:2]
    prompts = [render(t, "chat") for t in tasks]
    sampling = Sampling(n=N, temperature=1.0, top_k=50, max_new_tokens=MAX_NEW)
    eval_gen = HFGenerator(resolve(str(tiny_model_dir)), dtype="float32", batch_size=len(prompts) * N)
    evaluated = eval_gen.generate(prompts, sampling, seed=3)
    [(chunk_seed, _)] = seeded_chunks(prompts, len(prompts) * N, N, 3)

    rows = [{"prompt": p.for_trl(), "task_id": t.id} for p, t in zip(prompts, tasks, strict=True)]
    trainer = fake_trainer(eval_gen.model, eval_gen.tokenizer, sampling)
    with Sandbox(SandboxConfig(backend="local", workers=2)) as sandbox:
        cfg = RewardsConfig()
        verifier = reward_verifier(cfg, sandbox, load_suite("demo").split("1-4"))
        rollouts = Rollouts(PromptIndex(rows), verifier, "chat", TransformersEngine(training_sampling(trainer.args)))
        rollouts.seeds = lambda trainer: chunk_seed  # the seed eval gave this chunk
        batch = [r["prompt"] for r in rows for _ in range(N)]
        out = rollouts(batch, trainer)
        records = out["rollout"]
        # The same completions, and the same "cut at the length limit".
        assert [r.text for r in records] == [c for per in evaluated for c in per]
        assert [r.cut for r in records] == [c.cut for per in evaluated for c in per]
        assert any(r.ended == "end" for r in records)
        assert [r.task_id for r in records] == [t.id for t in tasks for _ in range(N)]
        assert out["prompt_ids"][0] == eval_gen.prompt_ids(trl_prompt(batch[0]))
        assert out["logprobs"] is None  # TRL reads them with vLLM only
        # The same verdicts: the reward function on the records, eval's verifier on its texts.
        [func] = build_reward_funcs(cfg, verifier, style="chat")
        completions = [[{"role": "assistant", "content": r.text}] for r in records]
        asyncio.run(func(batch, completions, out["completion_ids"], task_id=[r.task_id for r in records],
                         rollout=records))
        trained = [(s.verdict.status, [t.verdict.value for t in s.result.tests] if s.result else [])
                   for s in func.last]
        judged = verifier.judge([verifier.submit(verifier.task(t.id), c, "chat", c.cut)
                                 for t, per in zip(tasks, evaluated, strict=True) for c in per])
        assert trained == [(j.status, [t.verdict.value for t in j.result.tests] if j.result else []) for j in judged]
        verifier.close()


def test_a_row_stopped_after_its_program_leaves_the_batch_and_the_others_sample_the_same(
        tiny_model_dir: Path) -> None:
    """The decode loop drops an ended row; the other rows' completions do not change."""
    from grpo_code.generation.hf_decode import decode
    from grpo_code.generation.stream import Watch

    gen = HFGenerator(resolve(str(tiny_model_dir)), dtype="float32")
    [prompt] = [render(load_suite("demo").split("1-4").tasks[0], "chat")]
    ids = [gen.prompt_ids(prompt)] * 3
    sampling = Sampling(temperature=1.0, max_new_tokens=MAX_NEW)
    plain = decode(gen.model, ids, sampling, 9, gen.end_ids, gen.tokenizer.pad_token_id)
    widths: list[int] = []
    forward = gen.model.forward

    def counting(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        widths.append(kwargs["input_ids"].shape[0])
        return forward(*args, **kwargs)

    gen.model.forward = counting  # a probe on this test's own model instance
    watch = Watch(gen.kinds, is_whole=lambda row, so_far: row == 1 and len(so_far) >= 2)
    watch.kinds = lambda token: (True, True)
    stopped = decode(gen.model, ids, sampling, 9, gen.end_ids, gen.tokenizer.pad_token_id, watch)
    assert stopped[1].ended == "whole" and stopped[1].ids == plain[1].ids[:2]
    assert [stopped[0].ids, stopped[2].ids] == [plain[0].ids, plain[2].ids]
    assert widths[:3] == [3, 3, 2]  # prefill, then the batch shrinks once row 1 is done
    assert all(s.logprobs and len(s.logprobs) == len(s.ids) for s in plain)


def test_hf_rollouts_sample_under_the_trainer_s_autocast(tiny_model_dir: Path) -> None:
    """With ``train.trl.bf16`` TRL computes the policy's log-probs under the accelerator's
    autocast; the hf rollouts sample under the same context, so the rows come from the
    policy the update scores (its matmuls in bf16), and in fp32 without it."""
    import torch


    gen = HFGenerator(resolve(str(tiny_model_dir)), dtype="float32")
    [prompt] = [render(load_suite("demo").split("1-4").tasks[0], "chat")]
    sampling = Sampling(temperature=1.0, max_new_tokens=4)
    seen: list[torch.dtype] = []
    hook = gen.model.get_output_embeddings().register_forward_hook(lambda m, i, out: seen.append(out.dtype))

    class Bf16:
        """The trainer's accelerator, with bf16 mixed precision's autocast."""

        def __init__(self, accelerator):  # noqa: ANN001
            self.accelerator = accelerator

        def __getattr__(self, name: str):  # noqa: ANN204
            return getattr(self.accelerator, name)

        def autocast(self):  # noqa: ANN202
            return torch.autocast("cpu", dtype=torch.bfloat16)

    try:
        trainer = fake_trainer(gen.model, gen.tokenizer, sampling)
        engine = TransformersEngine(sampling)
        plain = engine.generate(trainer, [gen.prompt_ids(prompt)] * 2, 5, None).samples
        assert set(seen) == {torch.float32}
        seen.clear()
        trainer.accelerator = Bf16(trainer.accelerator)
        mixed = engine.generate(trainer, [gen.prompt_ids(prompt)] * 2, 5, None).samples
        assert set(seen) == {torch.bfloat16}
        assert all(len(s.ids) >= 1 for s in plain + mixed)
    finally:
        hook.remove()


def test_rows_without_seeds_of_their_own_share_the_call_s_generator(tiny_model_dir: Path) -> None:
    """``generation.row_seeds: false``: the rows of a call draw from one generator, seeded from
    the call: the call repeats with its seed, its rows still differ, and a row's sample now
    depends on the rows beside it (which per-row seeds rule out)."""
    from grpo_code.generation.hf_decode import decode

    gen = HFGenerator(resolve(str(tiny_model_dir)), dtype="float32")
    [prompt] = [render(load_suite("demo").split("1-4").tasks[0], "chat")]
    ids = [gen.prompt_ids(prompt)] * 3
    shared = Sampling(temperature=1.0, max_new_tokens=MAX_NEW, row_seeds=False)
    first = decode(gen.model, ids, shared, 9, gen.end_ids, gen.tokenizer.pad_token_id)
    again = decode(gen.model, ids, shared, 9, gen.end_ids, gen.tokenizer.pad_token_id)
    assert [s.ids for s in first] == [s.ids for s in again]
    assert len({tuple(s.ids) for s in first}) > 1
    own = decode(gen.model, ids, Sampling(temperature=1.0, max_new_tokens=MAX_NEW), 9, gen.end_ids,
                 gen.tokenizer.pad_token_id)
    assert [s.ids for s in own] != [s.ids for s in first]
    args = SimpleNamespace(temperature=0.7, top_p=1.0, top_k=50, max_completion_length=32, repetition_penalty=1.0,
                           min_p=None, generation_kwargs=None)
    from grpo_code.training.rollouts import training_sampling

    assert training_sampling(args, row_seeds=False).row_seeds is False and training_sampling(args).row_seeds


def test_settings_the_rollouts_do_not_implement_are_refused() -> None:
    from grpo_code.errors import ConfigError
    from grpo_code.training.rollouts import training_sampling

    args = SimpleNamespace(temperature=0.7, top_p=0.9, top_k=None, max_completion_length=32, repetition_penalty=1.0,
                           min_p=None, generation_kwargs=None)
    assert training_sampling(args) == Sampling(temperature=0.7, top_p=0.9, top_k=0, max_new_tokens=32)
    args.repetition_penalty = 1.2
    with pytest.raises(ConfigError, match="repetition_penalty"):
        training_sampling(args)


def test_a_prompt_two_tasks_share_maps_to_no_task() -> None:
    same = [{"role": "user", "content": "Write f."}]
    index = PromptIndex([{"prompt": same, "task_id": "a"}, {"prompt": same, "task_id": "b"},
                         {"prompt": "raw text", "task_id": "c"}])
    assert index.task_id(same) is None and index.task_id("raw text") == "c" and len(index.shared) == 1
    with pytest.raises(KeyError):
        index.task_id("not in the set")


def test_every_seed_is_derived_by_the_one_rule() -> None:
    """The seeding rule is written once (generation/stream.py): no module computes a seed
    with its own arithmetic."""
    import ast

    from grpo_code.generation.stream import derive_seed, sample_seed
    from grpo_code.training.rollouts import batch_seed

    assert sample_seed(7, 2) == derive_seed(7, 2) == 7 * 1_000_003 + 2
    assert batch_seed(7, 3, 1, 2) == derive_seed(derive_seed(derive_seed(derive_seed(7, 3), 1), 2))
    assert len({derive_seed(7, a, b) for a in range(30) for b in range(30)}) == 900
    package = Path(__file__).resolve().parents[1] / "grpo_code"
    own = []
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add)):
                names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                names |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
                if "seed" in names and path.name != "stream.py":
                    own.append(str(path.relative_to(package)))
    # a hash's bytes, not a sampling seed: the judge's tag (grpo_code/rewards/judge/prompts.py)
    assert own == ["rewards/judge/prompts.py"], own
