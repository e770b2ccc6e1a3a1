"""The TRL seam: each TRL internal that grpo_code.training.trl_seam relies on, pinned.

One real GRPO step on a tiny model goes through a SeamTrainer that records what each hook
saw. A TRL release that renames, re-signs or stops calling one of the overridden private
methods fails the test named after it, not a training run.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import Sampler
from transformers import StoppingCriteria

ORDER = [3, 1, 0, 2]  # the prompt order our sampler dictates
GENERATIONS = 2
STOP_ROW, STOP_AT = 0, 3
REWARD_S = 0.05  # how long the reward function takes


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


class StopOneRow(StoppingCriteria):
    """Ends row ``STOP_ROW`` after ``STOP_AT`` new tokens; counts its calls."""

    def __init__(self, rows: int):
        self.rows = rows
        self.prompt_length = 0
        self.calls: list[tuple[int, int]] = []
        self.stopped: dict[int, int] = {}

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        self.calls.append(tuple(input_ids.shape))
        stop = torch.zeros(input_ids.shape[0], dtype=torch.bool)
        if input_ids.shape[1] - self.prompt_length >= STOP_AT:
            self.stopped.setdefault(STOP_ROW, STOP_AT)
            stop[STOP_ROW] = True
        return stop


def lengths(prompts: list, completions: list, **kwargs: Any) -> list[float | None]:
    """Reward: the completion's length, masked (None) for its second row; it takes
    ``REWARD_S`` (so the time the seam reports waiting on it can be checked)."""
    time.sleep(REWARD_S)
    return [None if i == 1 else float(len(c[-1]["content"])) for i, c in enumerate(completions)]


@pytest.fixture(scope="module")
def step(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One GRPO step through a recording SeamTrainer; returns what each hook saw."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from grpo_code.training import trl_seam

    seen: dict[str, Any] = defaultdict(list)

    class Recorder(trl_seam.SeamTrainer):
        trim_padding = True

        def train_sampler(self, dataset: Any, pattern: Any) -> Any:
            seen["pattern"].append(pattern)
            return FixedSampler(pattern)

        def before_batch(self, inputs: list[dict[str, Any]]) -> None:
            seen["batch"].append([x["task_id"] for x in inputs])

        def after_batch(self) -> None:
            seen["after_batch"].append(True)
            self.log_metric("seam/probe", 7.0)

        def generation_watcher(self, rows: int) -> StoppingCriteria:
            watcher = StopOneRow(rows)
            seen["watcher"].append(watcher)
            return watcher

        def after_generation(self, completion_ids: list[list[int]], seconds: float) -> None:
            seen["completion_ids"].append(completion_ids)
            super().after_generation(completion_ids, seconds)

        def after_rewards(self, inputs: list[dict[str, Any]], completions: list[Any], rewards: torch.Tensor,
                          waited_s: float) -> None:
            seen["rewards"].append((inputs, completions, rewards.clone(), waited_s))

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
    try:
        trainer = Recorder(model=model, reward_funcs=[lengths], args=args, train_dataset=data,
                           processing_class=tokenizer)
        trainer.train()
    finally:
        trl_seam.length_chunks = chunked
    seen["log_history"] = trainer.state.log_history
    seen["eos"] = trainer.end_token_ids
    seen["eos_before"] = trl_seam.end_token_ids(model, tokenizer)
    return seen


def test_get_train_sampler_takes_our_sampler_with_trls_repeat_pattern(step: dict[str, Any]) -> None:
    from grpo_code.training.trl_seam import RepeatPattern

    # 4 rows per step, groups of 2: two prompts per generation batch, used once.
    assert step["pattern"] == [RepeatPattern(mini_repeat_count=GENERATIONS, batch_size=2, repeat_count=1, seed=0)]
    assert step["batch"][0] == [f"t{i}" for i in ORDER[:2] for _ in range(GENERATIONS)]


def test_generate_and_score_completions_sees_each_batch_with_its_columns(step: dict[str, Any]) -> None:
    assert len(step["batch"]) == len(step["after_batch"]) == 1
    inputs = step["rewards"][0][0]
    assert [x["task_id"] for x in inputs] == step["batch"][0]


def test_generate_single_turn_runs_model_generate_with_our_stopping_criterion(step: dict[str, Any]) -> None:
    (watcher,) = step["watcher"]
    assert watcher.calls and all(rows == 4 for rows, _ in watcher.calls)
    assert watcher.prompt_length > 0 and watcher.calls[0][1] == watcher.prompt_length + 1
    (ids,) = step["completion_ids"]
    assert len(ids) == 4 and len(ids[STOP_ROW]) == STOP_AT  # cut where the watcher stopped it
    assert all(len(row) <= 8 for row in ids)


def test_calculate_rewards_returns_every_row_with_masked_ones_as_nan(step: dict[str, Any]) -> None:
    inputs, completions, rewards, waited = step["rewards"][0]
    assert rewards.shape == (4, 1) and REWARD_S <= waited < REWARD_S + 5
    assert torch.isnan(rewards[1, 0]) and not torch.isnan(rewards[[0, 2, 3], 0]).any()
    assert rewards[0, 0].item() == len(completions[0][-1]["content"])


def test_forward_pass_goes_through_the_trimmed_log_probs(step: dict[str, Any]) -> None:
    assert step["length_chunks"], "TRL's loss no longer calls _get_per_token_logps_and_entropies"


def test_log_metric_lands_in_the_logged_step(step: dict[str, Any]) -> None:
    logged = [h for h in step["log_history"] if "seam/probe" in h]
    assert logged and logged[0]["seam/probe"] == 7.0
    assert any("timing/generate_s" in h for h in step["log_history"])
    assert step["eos"]


def test_end_tokens_are_known_before_the_trainer_as_it_takes_them(step: dict[str, Any]) -> None:
    """The reward function is built with ``end_token_ids`` before the trainer exists; the
    trainer refuses a reward function whose end tokens differ from its own."""
    assert step["eos_before"] == step["eos"]


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
    """A rollout_func (how multi-turn rollouts reach TRL) generates through the seam
    (tokenize_prompts, generate_turn) and returns env_mask: the loss's gradient on the
    log-prob of every masked (feedback) token is zero, and not on the model's own."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from grpo_code.training.trl_seam import SeamTrainer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    feedback_ids = tokenizer("The test failed. Try again.", add_special_tokens=False)["input_ids"]
    seen: dict[str, Any] = {}

    def rollout(prompts: list, trainer: Any) -> dict[str, Any]:
        prompt_ids = trainer.tokenize_prompts(prompts)
        first, _ = trainer.generate_turn(prompt_ids, trainer.num_generations)
        second, _ = trainer.generate_turn([p + f + feedback_ids for p, f in zip(prompt_ids, first, strict=True)])
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
