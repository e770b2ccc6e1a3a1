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
from ast_scans import assigned_attributes
from torch.utils.data import Sampler

ORDER = [3, 1, 0, 2]  # the prompt order our sampler dictates
GENERATIONS = 2
STOP_ROW, STOP_AT = 0, 3
REWARD_S = 0.05  # how long the reward function takes
PACKAGE = Path(__file__).resolve().parents[1] / "grpo_code"

TOUCH_POINTS = {
    "_get_train_sampler": "trl: the prompt filter's sampler (overridden): TRL has no public way to choose it",
    "_get_per_token_logps_and_entropies": "trl: train.trim_padding (overridden): no hook into TRL's forward pass",
    "_last_loaded_step": "trl: our engine in TRL's place (the rollout worker ahead of the update; the CPU build's "
                         "colocated engine, whose KV cache TRL cannot size): TRL's importance-sampling correction "
                         "and weight sync run only with its vLLM flag, set after __init__ with our engine as "
                         "vllm_generation and this step marker reset as TRL's __init__ would",
}
"""Every private TRL/vLLM attribute grpo-code reads, writes, calls or overrides, with its
reason (at most three): :func:`private_touches` finds them."""

OTHER_PRIVATE = {
    "_sock": "docker-py: the raw socket under an attach stream (grpo_code/sandbox/docker_backend.py)",
    "_run_exitfuncs": "atexit: run a program's exit handlers before a forked child ends (executor/ending.py)",
    "_shutdown": "threading: wait for a program's threads as the interpreter does at exit (executor/ending.py)",
    "_is_mkldnn_bf16_supported": "torch: whether oneDNN multiplies bf16 natively (generation/vllm.py)",
}
"""Private attributes of other libraries the package touches (not TRL's or vLLM's)."""


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
    from grpo_code.training.engines import TransformersEngine
    from grpo_code.training.rollouts import training_sampling, trl_prompt

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
        samples = TransformersEngine(training_sampling(trainer.args)).generate(trainer, ids, 0, watch).samples
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


def trl_names() -> set[str]:
    """Every private name of TRL's trainer: its methods and the attributes its classes
    (TRL's and transformers' ``Trainer``) set on ``self``."""
    import inspect
    import re

    import trl

    names = {n for n in dir(trl.GRPOTrainer) if n.startswith("_") and not n.startswith("__")}
    for cls in trl.GRPOTrainer.__mro__:
        if cls.__module__.startswith(("trl", "transformers")):
            names |= set(re.findall(r"self\.(_[A-Za-z]\w*)", inspect.getsource(cls)))
    return {n for n in names if not n.startswith("__")}


def private_touches(package: Path, trl_private: set[str]) -> dict[str, list[str]]:
    """Private attributes of other libraries that the package reads, writes, calls or
    overrides, each with where: (1) in a subclass of TRL's trainer, a name of ``trl_private``
    touched on ``self`` or ``super()`` or defined as a method; (2) anywhere, ``x._name``
    (``getattr(x, "_name")`` too) on an object not ``self``, when no module of the package
    defines or sets ``_name`` itself."""
    trees = {p: ast.parse(p.read_text()) for p in package.rglob("*.py")}
    ours: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                ours.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                ours.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                ours.add(node.attr)
    found: dict[str, list[str]] = defaultdict(list)

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    for path, tree in trees.items():
        where = str(path.relative_to(package.parent))
        trl_classes = {"GRPOTrainer", "SeamTrainer"}
        for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]:
            if not {ast.unparse(b).split(".")[-1] for b in cls.bases} & trl_classes:
                continue
            for node in ast.walk(cls):
                if isinstance(node, ast.FunctionDef) and node.name in trl_private:
                    found[node.name].append(f"{where}:{node.lineno} (overrides)")
                elif (isinstance(node, ast.Attribute) and node.attr in trl_private
                      and ast.unparse(node.value) in ("self", "super()")):
                    found[node.attr].append(f"{where}:{node.lineno}")
        for node in ast.walk(tree):
            name = base = None
            if isinstance(node, ast.Attribute) and private(node.attr):
                name, base = node.attr, ast.unparse(node.value)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                    "getattr", "setattr", "hasattr") and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                    and isinstance(node.args[1].value, str) and private(node.args[1].value)):
                name, base = node.args[1].value, ast.unparse(node.args[0])
            if name is not None and base not in ("self", "cls", "super()") and name not in ours:
                found[name].append(f"{where}:{node.lineno}")
    return dict(found)


def test_the_scan_finds_every_kind_of_private_touch(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text(
        "class T(SeamTrainer):\n"
        "    def _get_train_sampler(self):\n        return super()._get_train_sampler()\n"
        "    def go(self, llm):\n        self._last_loaded_step = -1\n        self._mine = 1\n"
        "        llm.llm_engine._engine_core.step()\n        getattr(llm, '_hidden')\n"
        "        return self._mine, llm._own\n"
        "def own(x):\n    x._own = 2\n")
    found = private_touches(package, {"_get_train_sampler", "_last_loaded_step", "_other"})
    assert set(found) == {"_get_train_sampler", "_last_loaded_step", "_engine_core", "_hidden"}
    assert found["_get_train_sampler"] == ["pkg/m.py:2 (overrides)", "pkg/m.py:3"]


def test_the_private_touch_points_are_the_listed_three() -> None:
    """Every private TRL or vLLM attribute the package reads, writes, calls or overrides is
    one of the listed three, each with its reason; the other libraries' privates are listed
    too, so a new touch of any fails here (the seam's claim: nothing else reaches inside
    TRL or vLLM)."""
    assert len(TOUCH_POINTS) <= 3
    found = private_touches(PACKAGE, trl_names())
    assert set(found) == set(TOUCH_POINTS) | set(OTHER_PRIVATE), found
    for name in TOUCH_POINTS:
        assert all(w.startswith("grpo_code/training/trl_seam.py:") for w in found[name]), (name, found[name])
    assert _overrides() == {"_get_train_sampler", "_get_per_token_logps_and_entropies"}
    seam = (PACKAGE / "training" / "trl_seam.py").read_text()
    assert "sync_weights = " not in seam


def test_no_module_patches_generate_engines_or_trl_globals() -> None:
    """No assignment to ``model.generate``, to a vLLM engine's methods, or to a name inside a
    TRL or vLLM module."""
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            for t in assigned_attributes(node):
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
    from grpo_code.training.engines import TransformersEngine
    from grpo_code.training.rollouts import training_sampling, trl_prompt
    from grpo_code.training.trl_seam import SeamTrainer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    feedback_ids = tokenizer("The test failed. Try again.", add_special_tokens=False)["input_ids"]
    seen: dict[str, Any] = {}

    def rollout(prompts: list, trainer: Any) -> dict[str, Any]:
        prompt_ids = [ids_of(trainer.processing_class, trl_prompt(p)) for p in prompts]
        engine = TransformersEngine(training_sampling(trainer.args))
        first = [s.ids for s in engine.generate(trainer, prompt_ids, 0, None).samples]
        second = [s.ids for s in engine.generate(trainer, [p + f + feedback_ids for p, f in
                                                           zip(prompt_ids, first, strict=True)], 1, None).samples]
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
    """Touch point 3: with ``use_engine`` TRL calls the engine's ``sync_weights`` once
    per step, weighs the rollout's log-probs (truncated at ``clip_max``) and our clipped share
    of those ratios is logged with the step. Row 0's behaviour log-probs are far below the
    trainer's (a ratio past any cap), the others' at the trainer's own."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from grpo_code.generation.base import prompt_ids
    from grpo_code.training import trl_seam
    from grpo_code.training.engines import EngineKind
    from grpo_code.training.rollouts import trl_prompt

    class Push:
        """An engine ahead of the update, as TRL sees it."""

        kind = EngineKind.AHEAD
        importance_sampled = True

        def __init__(self) -> None:
            self.steps: list[int] = []
            self.sampler = None

        def attach(self, trainer: Any) -> None:
            self.trainer = trainer

        def wrap_sampler(self, sampler: Any) -> Any:
            self.sampler = sampler
            return sampler

        def sync_weights(self) -> None:
            self.steps.append(self.trainer.state.global_step)

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
    trainer.use_engine(push)
    trainer.train()
    assert push.steps == [0, 1] and push.sampler is not None
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
