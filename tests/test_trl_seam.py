"""The TRL seam: each TRL internal that grpo_code relies on, listed and pinned.

One real GRPO step on a tiny model goes through a SeamTrainer whose rollout_func generates
with our hf decode loop and records what each hook saw. A TRL release that renames,
re-signs or stops calling an overridden private method, or changes what its public
``rollout_func`` gets and passes on, fails the test named after it, not a training run.
"""

from __future__ import annotations

import ast
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import Sampler

ORDER = [3, 1, 0, 2]  # the prompt order our sampler dictates
GENERATIONS = 2
STOP_ROW, STOP_AT = 0, 3
REWARD_S = 0.05  # how long the reward function takes
PACKAGE = Path(__file__).resolve().parents[1] / "grpo_code"

TOUCH_POINTS = {
    "_get_train_sampler": "the prompt filter's sampler: TRL has no public way to choose it",
    "_get_per_token_logps_and_entropies": "train.trim_padding: no hook into TRL's forward pass",
    "use_vllm": "our engine in TRL's place (the rollout worker ahead of the update; the CPU build's colocated "
                "engine, whose KV cache TRL cannot size): TRL's importance-sampling correction and weight sync run "
                "only with its vLLM flag, which is set after __init__ with our engine as vllm_generation",
}
"""Every private TRL/vLLM surface grpo-code touches, with its reason (at most three)."""


class FixedSampler(Sampler[int]):
    """TRL's repeat pattern over a fixed prompt order."""

    def __init__(self, pattern: Any):
        self.pattern = pattern

    def __iter__(self) -> Any:
        for start in range(0, len(ORDER), self.pattern.batch_size):
            chunk = ORDER[start:start + self.pattern.batch_size]
            for _ in range(self.pattern.repeat_count):
                for index in chunk:
                    yield from [index] * self.pattern.mini_repeat_count

    def __len__(self) -> int:
        return len(ORDER) * self.pattern.mini_repeat_count * self.pattern.repeat_count


def lengths(prompts: list, completions: list, **kwargs: Any) -> list[float | None]:
    """Reward: the completion's length, masked (None) for its second row; it takes
    ``REWARD_S``, logs a metric and keeps what it was given."""
    time.sleep(REWARD_S)
    lengths.seen.append(kwargs)
    kwargs["log_metric"]("seam/probe", 7.0)
    return [None if i == 1 else float(len(c[-1]["content"])) for i, c in enumerate(completions)]


lengths.seen = []


@pytest.fixture(scope="module")
def step(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One GRPO step through a recording SeamTrainer; returns what each hook saw."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from grpo_code.generation.base import end_token_ids, prompt_ids
    from grpo_code.generation.stream import TokenKinds, Watch
    from grpo_code.training import trl_seam
    from grpo_code.training.rollouts import sample_rows, trl_prompt

    seen: dict[str, Any] = defaultdict(list)

    class Recorder(trl_seam.SeamTrainer):
        trim_padding = True

        def train_sampler(self, dataset: Any, pattern: Any) -> Any:
            seen["pattern"].append(pattern)
            return FixedSampler(pattern)

    def rollout(prompts: list, trainer: Any) -> dict[str, Any]:
        seen["prompts"].append(prompts)
        ids = [prompt_ids(trainer.processing_class, trl_prompt(p)) for p in prompts]
        ended: list[tuple[int, str]] = []
        watch = Watch(TokenKinds(trainer.processing_class), on_end=lambda row, s: ended.append((row, s.ended)),
                      is_whole=lambda row, so_far: row == STOP_ROW and len(so_far) >= STOP_AT)
        watch.kinds = lambda token: (True, True)  # every token may end a program here
        samples = sample_rows(trainer, ids, 0, watch)
        seen["samples"].append(samples)
        seen["ended"].append(ended)
        return {"prompt_ids": ids, "completion_ids": [s.ids for s in samples], "logprobs": None,
                "record": [f"row{i}" for i in range(len(ids))], "batch_wide": "one"}

    chunked = trl_seam.length_chunks

    def counting(*args: Any, **kwargs: Any) -> Any:
        seen["length_chunks"].append(args)
        return chunked(*args, **kwargs)

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": f"Write function number {i}."}],
                               "task_id": f"t{i}"} for i in range(4)])
    args = GRPOConfig(output_dir=str(tmp_path_factory.mktemp("seam")), per_device_train_batch_size=4,
                      num_generations=GENERATIONS, max_completion_length=8, max_steps=1, report_to="none",
                      logging_steps=1, save_strategy="no", use_cpu=True, disable_tqdm=True,
                      remove_unused_columns=False, temperature=1.0, seed=0, beta=0.0)
    trl_seam.length_chunks = counting
    lengths.seen.clear()
    try:
        trainer = Recorder(model=model, reward_funcs=[lengths], args=args, train_dataset=data,
                           processing_class=tokenizer, rollout_func=rollout)
        trainer.train()
    finally:
        trl_seam.length_chunks = chunked
    seen["rewarded"] = list(lengths.seen)
    seen["log_history"] = trainer.state.log_history
    seen["eos"] = list(trainer.eos_token_ids)
    seen["eos_before"] = end_token_ids(model, tokenizer)
    return seen


def test_get_train_sampler_takes_our_sampler_with_trls_repeat_pattern(step: dict[str, Any]) -> None:
    from grpo_code.training.trl_seam import RepeatPattern

    # 4 rows per step, groups of 2: two prompts per generation batch, used once.
    assert step["pattern"] == [RepeatPattern(mini_repeat_count=GENERATIONS, batch_size=2, repeat_count=1, seed=0)]
    [prompts] = step["prompts"]
    expected = [f"Write function number {i}." for i in ORDER[:2] for _ in range(GENERATIONS)]
    assert [p[-1]["content"] for p in prompts] == expected  # repeated, in our sampler's order


def test_rollout_func_extra_fields_reach_the_reward_function_row_by_row(step: dict[str, Any]) -> None:
    [kwargs] = step["rewarded"]
    assert kwargs["record"] == [f"row{i}" for i in range(4)]  # a list: one value per row
    assert kwargs["batch_wide"] == ["one"] * 4  # not a list: every row gets it
    assert kwargs["task_id"] == [f"t{i}" for i in ORDER[:2] for _ in range(GENERATIONS)]
    assert kwargs["trainer_state"] is not None


def test_our_decode_loop_stops_a_row_and_frees_it(step: dict[str, Any]) -> None:
    [samples] = step["samples"]
    assert len(samples) == 4 and len(samples[STOP_ROW].ids) == STOP_AT and samples[STOP_ROW].ended == "whole"
    assert all(len(s.ids) <= 8 for s in samples)
    [ended] = step["ended"]
    assert sorted(row for row, _ in ended) == [0, 1, 2, 3]  # each row reported once, as it ended


def test_forward_pass_goes_through_the_trimmed_log_probs(step: dict[str, Any]) -> None:
    assert step["length_chunks"], "TRL's loss no longer calls _get_per_token_logps_and_entropies"


def test_log_metric_of_a_reward_function_lands_in_the_logged_step(step: dict[str, Any]) -> None:
    logged = [h for h in step["log_history"] if "seam/probe" in h]
    assert logged and logged[0]["seam/probe"] == 7.0


def test_end_tokens_are_known_before_the_trainer_as_it_takes_them(step: dict[str, Any]) -> None:
    """Rollouts and eval decide that a completion ended with ``end_token_ids``; the trainer
    (TRL's truncation mask) with its own ``eos_token_ids``: the same."""
    assert step["eos_before"] == step["eos"]


def _overrides() -> set[str]:
    tree = ast.parse((PACKAGE / "training" / "trl_seam.py").read_text())
    [seam] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SeamTrainer"]
    return {n.name for n in seam.body if isinstance(n, ast.FunctionDef) and n.name.startswith("_")
            and not n.name.startswith("__") and n.name in dir(__import__("trl").GRPOTrainer)}


def test_the_private_touch_points_are_the_listed_three() -> None:
    """Every private TRL method SeamTrainer overrides, and the TRL attributes set on an
    instance, are listed with their reasons; nothing else in the package overrides TRL's
    privates or replaces a method of TRL's engine."""
    assert len(TOUCH_POINTS) <= 3
    assert _overrides() == {k for k in TOUCH_POINTS if k.startswith("_")}
    seam = (PACKAGE / "training" / "trl_seam.py").read_text()
    assert "sync_weights = " not in seam
    assert "self.use_vllm = True" in seam and "self._last_loaded_step = -1" in seam
    trl_private = set(dir(__import__("trl").GRPOTrainer))
    for path in PACKAGE.rglob("*.py"):
        if path.name == "trl_seam.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("_") and not node.name.startswith("__"):
                assert node.name not in trl_private, f"{path}: overrides {node.name}"


def test_no_module_patches_generate_engines_or_trl_globals() -> None:
    """No assignment to ``model.generate``, to a vLLM engine's methods, or to a name inside a
    TRL or vLLM module."""
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AugAssign | ast.AnnAssign) else []
            for target in targets:
                for t in (target.elts if isinstance(target, ast.Tuple) else [target]):
                    if not isinstance(t, ast.Attribute):
                        continue
                    text = ast.unparse(t)
                    base = ast.unparse(t.value)
                    assert not (t.attr == "generate" and base != "self"), f"{path}: {text}"
                    assert not (t.attr in {"step", "add_request", "abort_request"} and "engine" in base), f"{path}: {text}"
                    assert not text.startswith(("trl", "vllm", "trl_vllm")), f"{path}: {text}"


def test_trim_padding_turns_itself_off_for_absolute_positions() -> None:
    """GPT-2 learns absolute positions: cutting left padding shifts them and changes the
    log-probs, so trim_padding turns off with a warning; a rotary model keeps it."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    from grpo_code.training.packing import trim_padding_for

    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50, n_positions=64)).eval()
    ids = torch.randint(1, 50, (1, 6))
    padded = torch.cat([torch.zeros(1, 3, dtype=torch.long), ids], dim=1)
    mask = torch.cat([torch.zeros(1, 3, dtype=torch.long), torch.ones(1, 6, dtype=torch.long)], dim=1)
    with torch.no_grad():
        cut = gpt2(ids).logits[0]
        full = gpt2(padded, attention_mask=mask).logits[0, 3:]
    assert not torch.allclose(cut, full, atol=1e-4)  # why: the cut is not exact here

    notes: list[str] = []
    assert trim_padding_for(gpt2, True, notes.append) is False
    assert len(notes) == 1 and "train.trim_padding is off" in notes[0] and "gpt2" in notes[0]
    assert trim_padding_for(gpt2, False, notes.append) is False and len(notes) == 1
    llama = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=2))
    assert trim_padding_for(llama, True, notes.append) is True and len(notes) == 1


def test_rollout_func_env_mask_keeps_feedback_tokens_out_of_the_loss(tiny_model_dir: Path,
                                                                      tmp_path: Path) -> None:
    """A rollout_func (how multi-turn rollouts reach TRL) generates with our decode loop and
    returns env_mask: the loss's gradient on the log-prob of every masked (feedback) token
    is zero, and not on the model's own."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from grpo_code.generation.base import prompt_ids as ids_of
    from grpo_code.training.rollouts import sample_rows, trl_prompt
    from grpo_code.training.trl_seam import SeamTrainer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    feedback_ids = tokenizer("The test failed. Try again.", add_special_tokens=False)["input_ids"]
    seen: dict[str, Any] = {}

    def rollout(prompts: list, trainer: Any) -> dict[str, Any]:
        prompt_ids = [ids_of(trainer.processing_class, trl_prompt(p)) for p in prompts]
        first = [s.ids for s in sample_rows(trainer, prompt_ids, 0, None)]
        second = [s.ids for s in sample_rows(trainer, [p + f + feedback_ids for p, f in
                                                       zip(prompt_ids, first, strict=True)], 1, None)]
        ids = [f + feedback_ids + s for f, s in zip(first, second, strict=True)]
        mask = [[1] * len(f) + [0] * len(feedback_ids) + [1] * len(s) for f, s in zip(first, second, strict=True)]
        seen["mask"] = mask
        return {"prompt_ids": prompt_ids, "completion_ids": ids, "logprobs": None, "env_mask": mask}

    class Probe(SeamTrainer):
        def _get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any) -> Any:
            logps, entropies, aux = super()._get_per_token_logps_and_entropies(*args, **kwargs)
            if logps.requires_grad:
                logps.retain_grad()
                seen["logps"] = logps
            return logps, entropies, aux

    def alternating(prompts: list, completions: list, **kwargs: Any) -> list[float]:
        return [float(i % 2) for i in range(len(completions))]  # each group of 2: one good, one bad

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": f"Write function number {i}."}],
                               "task_id": f"t{i}"} for i in range(4)])
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=8, max_steps=1, report_to="none", logging_steps=1, save_strategy="no",
                      use_cpu=True, disable_tqdm=True, remove_unused_columns=False, temperature=1.0, seed=0, beta=0.0)
    trainer = Probe(model=model, reward_funcs=[alternating], args=args, train_dataset=data,
                    processing_class=tokenizer, rollout_func=rollout)
    trainer.train()
    grad = seen["logps"].grad
    assert grad is not None
    for row, mask in enumerate(seen["mask"]):
        fed = [i for i, m in enumerate(mask) if m == 0]
        assert fed and all(grad[row, i].item() == 0.0 for i in fed), row
    own = [grad[row, i].item() for row, mask in enumerate(seen["mask"]) for i, m in enumerate(mask) if m == 1]
    assert any(g != 0.0 for g in own), "the model's own tokens must carry the loss"


def test_a_rollout_worker_stands_in_for_trls_engine_and_its_log_probs_are_weighed(
        tiny_model_dir: Path, tmp_path: Path) -> None:
    """Touch point 3: with ``use_engine`` TRL calls the push's ``sync_weights`` once
    per step, weighs the rollout's log-probs (truncated at ``clip_max``) and our clipped share
    of those ratios is logged with the step. Row 0's behaviour log-probs are far below the
    trainer's (a ratio past any cap), the others' at the trainer's own."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from grpo_code.generation.base import prompt_ids
    from grpo_code.training import trl_seam
    from grpo_code.training.rollouts import trl_prompt

    class Push:
        def __init__(self) -> None:
            self.steps: list[int] = []

        def sync_weights(self) -> None:
            self.steps.append(trainer.state.global_step)

    def rollout(prompts: list, trainer: Any) -> dict[str, Any]:
        ids = [prompt_ids(trainer.processing_class, trl_prompt(p)) for p in prompts]
        completions = [[100 + r, 200 + r, 300 + r] for r in range(len(ids))]
        with torch.no_grad():
            logps = []
            for r, (p, c) in enumerate(zip(ids, completions)):
                logits = trainer.model(torch.tensor([p + c])).logits[0, len(p) - 1:-1].float()
                own = logits.log_softmax(-1).gather(1, torch.tensor(c)[:, None])[:, 0].tolist()
                logps.append([x - 5.0 for x in own] if r == 0 else own)
        return {"prompt_ids": ids, "completion_ids": completions, "logprobs": logps}

    def reward(completions: list, **kwargs: Any) -> list[float]:
        return [float(i % 2) for i in range(len(completions))]

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": f"Write function number {i}."}]}
                              for i in range(4)])
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=3, max_steps=2, report_to="none", logging_steps=1, save_strategy="no",
                      use_cpu=True, disable_tqdm=True, remove_unused_columns=False, temperature=1.0, seed=0,
                      beta=0.0, use_vllm=False, vllm_importance_sampling_mode="token_truncate",
                      vllm_importance_sampling_clip_max=3.0)
    trainer = trl_seam.SeamTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=data,
                                   processing_class=tokenizer, rollout_func=rollout)
    push = Push()
    trainer.use_engine(push, ahead=True)
    trainer.train()
    assert push.steps == [0, 1]
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logged) == 2
    for h in logged:
        assert h["sampling/importance_sampling_ratio/max"] == pytest.approx(3.0)
        # Row 0 of 4 holds 3 of the 12 completion tokens: a quarter of them, each at e^5 > 3.
        assert h["async/is_clipped_share"] == pytest.approx(0.25)


@pytest.mark.parametrize("loss_type", ["dapo", "grpo", "bnpo", "dr_grpo", "cispo"])
def test_rows_of_zero_advantage_skip_the_update_and_leave_the_gradient_as_it_was(
        tiny_model_dir: Path, tmp_path: Path, loss_type: str) -> None:
    """``train.skip_zero_advantage``: a micro-batch whose groups half have equal rewards
    (advantage 0) runs the update's forward on the other rows only, with TRL's
    importance-sampling weights in the loss, and gives the loss and the gradient of the
    whole batch, for each loss type it applies to; a batch of which no row teaches still
    steps, with a zero loss and gradient. With a KL term every row is kept."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from grpo_code.training import trl_seam

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "hi"}]}] * 4)
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=8, num_generations=2,
                      max_completion_length=6, report_to="none", use_cpu=True, disable_tqdm=True,
                      remove_unused_columns=False, seed=0, beta=0.0, loss_type=loss_type,
                      activation_checkpointing=False)
    trainer = trl_seam.SeamTrainer(model=model, reward_funcs=[lambda completions, **kw: [0.0] * len(completions)],
                                   args=args, train_dataset=data, processing_class=tokenizer)
    trainer.current_gradient_accumulation_steps = 1
    trainer.use_vllm = True  # the batch carries importance-sampling weights, as with an engine
    model.train()
    torch.manual_seed(0)
    rows, width = 8, 6
    completion_mask = torch.ones(rows, width)
    for r, length in enumerate([6, 2, 4, 6, 3, 5, 1, 6]):
        completion_mask[r, length:] = 0
    ids = torch.randint(1, model.config.vocab_size, (rows, 5 + width))
    batch = {"prompt_ids": ids[:, :5], "prompt_mask": torch.ones(rows, 5, dtype=torch.long),
             "completion_ids": ids[:, 5:], "completion_mask": completion_mask,
             "advantages": torch.tensor([0.0, 0.0, 1.0, -1.0, 0.0, 0.0, -0.7, 0.7]),
             "num_items_in_batch": completion_mask.sum(),
             "importance_sampling_ratio": 0.8 + 0.4 * torch.rand(rows, width)}
    seen: list[int] = []
    forward = trl_seam.SeamTrainer._get_per_token_logps_and_entropies

    def counted(self: Any, model: Any, input_ids: Any, *a: Any, **kw: Any) -> Any:
        seen.append(input_ids.size(0))
        return forward(self, model, input_ids, *a, **kw)

    def loss_and_grad(skip: bool, inputs: dict[str, Any]) -> tuple[float, torch.Tensor]:
        trainer.skip_zero_advantage = skip
        model.zero_grad()
        seen.clear()
        loss = trainer.compute_loss(model, dict(inputs))
        loss.backward()
        grads = [p.grad.flatten() for p in model.parameters() if p.grad is not None]
        return float(loss.detach()), torch.cat(grads) if grads else torch.zeros(1)

    trl_seam.SeamTrainer._get_per_token_logps_and_entropies = counted
    try:
        whole = loss_and_grad(False, batch)
        assert seen == [rows]
        skipped = loss_and_grad(True, batch)
        assert seen == [4]  # the rows of the two groups whose rewards differ
        assert skipped[0] == pytest.approx(whole[0], rel=1e-5, abs=1e-7)
        assert whole[1].abs().sum() > 0
        assert torch.allclose(skipped[1], whole[1], rtol=1e-4, atol=1e-6 * float(whole[1].abs().max()))
        none = loss_and_grad(True, {**batch, "advantages": torch.zeros(rows)})
        assert seen == [1] and none[0] == 0.0 and none[1].abs().sum() == 0
        trainer.args.beta = 0.1  # a KL term reaches every row: none is left out
        assert not trainer.zero_rows_teach_nothing()
    finally:
        trl_seam.SeamTrainer._get_per_token_logps_and_entropies = forward
