"""The parts a training run is built from, in the order ``grpo_code.train._train`` builds
them: the suite, the policy, the training rows, the scoring (verifier, judge, early jobs,
reward functions) and the rollout function on the run's engine (:mod:`.engines`). Each
part that holds a resource is a context manager on the run's exit stack."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_code.errors import ConfigError, ModelError
from grpo_code.training.engines import EngineKind, EngineParts, TransformersEngine, TrlVllmEngine

Log = Callable[[str], None]


def quiet_transformers() -> None:
    """transformers' deprecation notices about its own internals (called by TRL) and its
    progress bars are not the user's business."""
    import warnings

    from transformers.utils import logging as hf_logging

    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    hf_logging.disable_progress_bar()


def load_run_suite(cfg: Any) -> Any:
    from grpo_code.tasks import load_suite

    return load_suite(cfg.tasks.suite, cfg.tasks.paths)


@dataclass(frozen=True)
class Policy:
    """The model trained, its tokenizer and how its prompts are rendered."""

    resolved: Any
    tokenizer: Any
    model: Any
    style: str
    trim_padding: bool
    peft_config: Any


def load_policy(cfg: Any, args: Any, log: Log) -> Policy:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_code.generation.base import prompt_style, resolve, torch_dtype
    from grpo_code.training.packing import trim_padding_for
    from grpo_code.training.rollouts import training_sampling

    training_sampling(args)  # settings the rollouts do not implement are refused before anything loads
    resolved = resolve(cfg.model.name, log)
    if resolved.adapter:
        raise ModelError(f"{cfg.model.name} is a LoRA adapter", "train from its base model with model.peft set")
    remote = cfg.model.trust_remote_code
    tokenizer = AutoTokenizer.from_pretrained(resolved.tokenizer_path, trust_remote_code=remote)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(resolved.path, dtype=torch_dtype(cfg.model.dtype),
                                                 trust_remote_code=remote)
    peft_config = None
    if cfg.model.peft:
        from peft import LoraConfig

        try:
            peft_config = LoraConfig(task_type="CAUSAL_LM", **cfg.model.peft)
        except TypeError as exc:
            raise ConfigError([f"model.peft: {exc}"]) from None
    return Policy(resolved, tokenizer, model, prompt_style(tokenizer), trim_padding_for(model, cfg.train.trim_padding, log),
                  peft_config)


def build_prompt_filter(cfg: Any) -> Any:
    if not cfg.train.filter.enabled:
        return None
    from grpo_code.training.filter import PromptFilter

    return PromptFilter(cfg.train.filter.history, cfg.train.filter.skip_prob, cfg.train.seed)


@dataclass(frozen=True)
class TrainingData:
    rows: list[dict[str, Any]]
    """One per training task: its rendered ``prompt`` and ``task_id``."""
    dataset: Any
    index: Any
    """:class:`~grpo_code.training.rollouts.PromptIndex`."""
    scored: Any
    """The tasks rewards are computed on (multi-turn: on their hidden tests, which no feedback can quote)."""


def task_prompt(cfg: Any, suite: Any, task: Any, style: str) -> Any:
    """A task's prompt as the run renders it: ``tasks.system_prompt``, else the suite's."""
    from grpo_code.tasks import render

    system_prompt = cfg.tasks.system_prompt if cfg.tasks.system_prompt is not None else suite.system_prompt
    return render(task, style, system_prompt, suite.prompt_template)


def training_data(cfg: Any, suite: Any, tasks: Any, style: str, log: Log) -> TrainingData:
    from datasets import Dataset

    from grpo_code.training.rollouts import PromptIndex

    rows = [{"prompt": task_prompt(cfg, suite, t, style).for_trl(), "task_id": t.id} for t in tasks.tasks]
    index = PromptIndex(rows)
    if index.shared:
        log(f"note: {len(index.shared)} training prompt(s) are shared by several tasks: their completions "
            "are scored after generation, by each row's own task")
    scored = tasks if cfg.train.multi_turn.turns <= 1 else dataclasses.replace(
        tasks, tasks=tuple(dataclasses.replace(t, tests=t.hidden_tests or t.tests) for t in tasks.tasks))
    return TrainingData(rows, Dataset.from_list(rows), index, scored)


class Scoring:
    """What scores a run's rollouts: the verifier on the sandbox, the generative judge
    (``None``: off), the early jobs (``None``: no overlap). Closed as one part."""

    def __init__(self, verifier: Any, judge: Any, early: Any, style: str):
        self.verifier = verifier
        self.judge = judge
        self.early = early
        self.style = style

    @classmethod
    def build(cls, cfg: Any, sandbox: Any, data: TrainingData, style: str, log: Log) -> Scoring:
        from grpo_code.rewards.functions import reward_verifier
        from grpo_code.rewards.judge import build_judge
        from grpo_code.verify.attested import script_tasks
        from grpo_code.verify.early import EarlyJobs

        scored = data.scored
        verifier = reward_verifier(cfg.rewards, sandbox, scored, extract=cfg.tasks.extract)
        native_scripts = script_tasks(scored)
        if native_scripts and not cfg.rewards.tests.trust_unattested:
            log(f"warning: {len(native_scripts)} of {len(scored.tasks)} tasks have script tests judged inside the "
                "program's process (unattested): their passes count as fails (rewards.tests.trust_unattested, "
                f"docs/rewards.md): {', '.join(native_scripts[:5])}")
        try:
            judge = build_judge(cfg.rewards.judge, scored)
        except BaseException:
            verifier.close()
            raise
        early = None
        if cfg.rewards.overlap and cfg.train.multi_turn.turns <= 1:
            early = EarlyJobs(verifier, style, on_program=judge.early if judge is not None else None)
        return cls(verifier, judge, early, style)

    def reward_funcs(self, cfg: Any, run_dir: Path, prompt_filter: Any, args: Any) -> list[Any]:
        from grpo_code.rewards.functions import build_reward_funcs
        from grpo_code.training.rollout_log import RolloutLog

        log = RolloutLog(run_dir / "completions.jsonl", prompt_filter, args.num_generations)
        return build_reward_funcs(cfg.rewards, self.verifier, style=self.style,
                                  turn_cost=cfg.train.multi_turn.turn_cost, judge=self.judge, log=log)

    def __enter__(self) -> Scoring:
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.verifier.close()
        finally:
            if self.judge is not None:
                self.judge.close()


def build_engine(kind: EngineKind, parts: EngineParts) -> Any:
    """The engine of ``kind`` (:func:`~grpo_code.training.engines.engine_kind`), the one place each
    way of generating is built; the caller closes it."""
    from grpo_code.training.rollouts import training_sampling

    sampling = training_sampling(parts.args, parts.cfg.generation.row_seeds)
    if kind is EngineKind.TRANSFORMERS:
        return TransformersEngine(sampling)
    if kind is EngineKind.TRL_VLLM:
        return TrlVllmEngine(sampling)
    if kind is EngineKind.COLOCATED:
        from grpo_code.training.colocated import start_colocated

        return start_colocated(parts, sampling)
    from grpo_code.training.ahead import start_ahead

    return start_ahead(parts, sampling)


class HeldOutPart:
    """The held-out eval of ``train.eval_every`` (:mod:`.held_out`) with its verifier, closed
    as one part; ``held`` is ``None`` when it is off, or on a process other than the main one
    (one process measures it)."""

    def __init__(self, held: Any, verifier: Any):
        self.held = held
        self.verifier = verifier

    @classmethod
    def build(cls, cfg: Any, suite: Any, sandbox: Any, policy: Policy, write: Callable[[dict[str, Any]], None],
              log: Log) -> HeldOutPart:
        if cfg.train.eval_every <= 0 or int(os.environ.get("RANK", "0")) != 0:
            return cls(None, None)
        from grpo_code.evaluate.execute import eval_verifier
        from grpo_code.generation.base import prompt_ids
        from grpo_code.training.held_out import HeldOut
        from grpo_code.verify import oracle

        tasks = suite.split(cfg.tasks.eval_split)
        if not tasks.tasks:
            raise ConfigError([f"train.eval_every: the held-out split tasks.eval_split={cfg.tasks.eval_split} of suite "
                               f"{suite.name} has no tasks; name a split that has some"])
        tasks = oracle.prepare(tasks, sandbox, log)
        prompts = [prompt_ids(policy.tokenizer, task_prompt(cfg, suite, t, policy.style)) for t in tasks.tasks]
        verifier = eval_verifier(tasks, sandbox, extract=cfg.tasks.extract)
        held = HeldOut(cfg.train.eval_every, [t.id for t in tasks.tasks], prompts, cfg.train.eval_n, verifier, policy.style,
                       cfg.train.seed, policy.tokenizer, lambda point: write(point.row()))
        log(f"held-out eval every {cfg.train.eval_every} updates: {len(tasks.tasks)} tasks of split "
            f"{cfg.tasks.eval_split}, {cfg.train.eval_n} sample(s) each, in the step's generation call")
        return cls(held, verifier)

    def __enter__(self) -> HeldOutPart:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.verifier is not None:
            self.verifier.close()


def build_rollouts(cfg: Any, kind: EngineKind, data: TrainingData, scoring: Scoring, engine: Any,
                   log: Log, held_out: Any = None) -> Any:
    """The ``rollout_func`` on ``engine``: multi-turn, ahead of the update, or single-turn."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is TRL's public hook for this
    if cfg.train.multi_turn.turns > 1:
        return multi_turn(cfg, scoring.style, data.index, scoring.verifier, engine, log)
    if kind is EngineKind.AHEAD:
        from grpo_code.training.ahead import AheadRollouts

        return AheadRollouts(data.index, data.rows, engine, cfg.train.max_staleness, held_out)
    from grpo_code.training.rollouts import Rollouts

    return Rollouts(data.index, scoring.verifier, scoring.style, engine, scoring.early,
                    stop_after_code=cfg.train.stop_after_code, held_out=held_out)


def multi_turn(cfg: Any, style: str, index: Any, verifier: Any, engine: Any, log: Log) -> Any:
    """The multi-turn rollout of ``train.multi_turn``, with what it turns off said."""
    from grpo_code.training.multiturn import MultiTurnRollout
    from grpo_code.verify.feedback import DEFAULT_TEMPLATE, check_template

    mt = cfg.train.multi_turn
    if style != "chat":
        raise ModelError(f"train.multi_turn.turns={mt.turns} needs a chat model: {cfg.model.name} has no chat template",
                         "train an instruct model, or set train.multi_turn.turns=1")
    template = mt.feedback_template or DEFAULT_TEMPLATE
    check_template(template)
    if cfg.rewards.overlap:
        log("note: multi-turn rollouts score the last answer once the rollout is over (rewards.overlap's early "
            "scoring is off); each turn's checks still start as rows end")
    return MultiTurnRollout(index, verifier, mt.turns, engine, template)
