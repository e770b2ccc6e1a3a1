"""``grpo-code train``: GRPO on TRL with sandbox rewards.

``run_training(config)`` builds, in order: the run directory (resolved config written
first), the train split of the suite as a prompt dataset (``prompt`` + ``task_id``
columns), the policy (short name, hub id or path; LoRA through ``model.peft``), the
sandbox pool (started once, closed on exit or Ctrl-C), the reward functions from
``rewards:``, and ``trl.GRPOConfig`` from ``train.trl`` (our generation settings fill
what it leaves unset). Then it trains and saves ``final/``.

Run directory: ``config.yaml``, ``metrics.jsonl``, ``completions.jsonl``, TensorBoard
events (when installed), ``checkpoint-N/`` and ``final/``. ``--resume`` continues from
the last checkpoint of a run with the same config.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_code import metric_names as M
from grpo_code.config import RunConfig, load_config, read_yaml
from grpo_code.errors import ConfigError, GrpoCodeError
from grpo_code.report.load import Window, quarters, read_metrics, step_values


class TrainError(GrpoCodeError):
    """Training cannot start or continue (bad resume, TRL refusing its settings)."""


@dataclass
class TrainSummary:
    run_dir: Path
    final_dir: Path
    steps: int
    first: Window | None
    """The first quarter of the logged steps (at least one); None when no reward was logged."""
    last: Window | None
    """The last quarter of the logged steps."""
    wall_s: float


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: data}


def config_diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Dotted keys whose values differ (``output.dir`` is where a run lives, not what it is)."""
    a, b = _flatten(old), _flatten(new)
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k) and k != "output.dir")


def run_dir_for(cfg: RunConfig) -> Path:
    if cfg.output.dir:
        return Path(cfg.output.dir)
    return Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{cfg.name}"


def last_checkpoint(run_dir: Path) -> Path | None:
    """The run's last whole checkpoint: one a run stopped while saving has no
    ``trainer_state.json`` (written last) and is passed over."""
    ckpts = [p for p in run_dir.glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()
             and (p / "trainer_state.json").is_file()]
    return max(ckpts, key=lambda p: int(p.name.split("-")[-1])) if ckpts else None


def saved_config(run_dir: Path) -> Path:
    """The ``config.yaml`` of an earlier run (a user error if there is none)."""
    path = run_dir / "config.yaml"
    if not path.is_file():
        raise TrainError(f"{run_dir} is not a run directory (no config.yaml)", "pass the directory of an earlier run")
    return path


def prepare_run(cfg: RunConfig, resume: Path | None) -> tuple[RunConfig, Path, Path | None]:
    """The run directory with its config written first; on resume, the same config and its last checkpoint."""
    if resume is None:
        run_dir = run_dir_for(cfg)
        if (run_dir / "config.yaml").exists():
            raise TrainError(f"{run_dir} already holds a run", "pass --resume to continue it or choose output.dir")
        run_dir.mkdir(parents=True, exist_ok=True)
        cfg = dataclasses.replace(cfg, output=dataclasses.replace(cfg.output, dir=str(run_dir)))
        (run_dir / "config.yaml").write_text(cfg.to_yaml())
        return cfg, run_dir, None
    saved = read_yaml(saved_config(resume))
    diff = config_diff(saved, cfg.to_dict())
    if diff:
        shown = ", ".join(diff[:8]) + (f" (+{len(diff) - 8} more)" if len(diff) > 8 else "")
        raise TrainError(f"the config differs from the run in {resume}: {shown}",
                         "resume with the same config and overrides, or start a new run")
    checkpoint = last_checkpoint(resume)
    if checkpoint is None:
        raise TrainError(f"{resume} has no checkpoint to resume from", "start a new run (checkpoints are saved every train.trl.save_steps)")
    cfg = dataclasses.replace(cfg, output=dataclasses.replace(cfg.output, dir=str(resume)))
    return cfg, resume, checkpoint


def prepare_run_once(cfg: RunConfig, resume: Path | None) -> tuple[RunConfig, Path, Path | None]:
    """:func:`prepare_run` on the main process only, when ``accelerate launch`` started several:
    the others take its run directory (a timestamped name must not differ between them) or its error."""

    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return prepare_run(cfg, resume)
    from accelerate import PartialState
    from accelerate.utils import broadcast_object_list

    state = PartialState()
    shared: list[Any] = [None]
    if state.is_main_process:
        try:
            prepared = prepare_run(cfg, resume)
            shared = [{"dir": prepared[0].output.dir, "checkpoint": prepared[2]}]
        except TrainError as exc:
            shared = [{"error": (exc.what, exc.hint)}]
    broadcast_object_list(shared)
    if "error" in shared[0]:
        raise TrainError(*shared[0]["error"])
    run_dir, checkpoint = shared[0]["dir"], shared[0]["checkpoint"]
    return dataclasses.replace(cfg, output=dataclasses.replace(cfg.output, dir=run_dir)), Path(run_dir), checkpoint


def load_run_config(config: Path | None, overrides: list[str], resume: Path | None) -> RunConfig:
    """The run config: the file + overrides, or on ``--resume`` without a file, the run's own."""
    if resume is not None and config is None:
        return load_config(saved_config(resume), overrides)
    return load_config(config, overrides)


def grpo_args(cfg: RunConfig, run_dir: Path) -> Any:
    """``trl.GRPOConfig`` from ``train.trl``; generation/sandbox settings fill what it leaves unset."""
    from trl import GRPOConfig

    gen = cfg.generation
    report_to = [r for r in cfg.output.report_to if r != "tensorboard" or importlib.util.find_spec("tensorboard")]
    defaults: dict[str, Any] = {
        "output_dir": str(run_dir),
        "seed": cfg.train.seed,
        "max_completion_length": gen.max_new_tokens,
        "temperature": gen.temperature,
        "top_p": gen.top_p,
        "top_k": gen.top_k,
        "logging_steps": 1,
        "disable_tqdm": True,
        "remove_unused_columns": False,
        "report_to": report_to or "none",
        "use_vllm": gen.backend == "vllm",
        "save_only_model": False,
        "trust_remote_code": cfg.model.trust_remote_code,  # TRL hands it to vLLM's engine
    }
    if cfg.train.max_staleness > 0:
        # The rollout worker is the engine (grpo_code.training.ahead); TRL builds none. Its
        # log-probs are weighed token by token: a sequence ratio masks long programs.
        defaults["use_vllm"] = False
        defaults["vllm_importance_sampling_mode"] = "token_truncate"
    elif gen.backend == "vllm":
        defaults["vllm_mode"] = gen.vllm_mode
        if own_colocated_engine(cfg):
            defaults["use_vllm"] = False  # ours stands in for TRL's (grpo_code.training.colocated)
        if gen.vllm_mode == "colocate":
            defaults["vllm_gpu_memory_utilization"] = gen.vllm_gpu_memory_utilization
        elif gen.server_url:
            defaults["vllm_server_base_url"] = gen.server_url
    kwargs = {**defaults, **cfg.train.trl, "output_dir": str(run_dir)}
    try:
        args = GRPOConfig(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError([f"train.trl: {str(exc).splitlines()[0]}"]) from None
    return args


def own_colocated_engine(cfg: RunConfig) -> bool:
    """Whether the run generates on a vLLM engine of ours in the training process (the CPU
    build, colocated, one step at a time) instead of TRL's."""
    if cfg.generation.backend != "vllm" or cfg.generation.vllm_mode != "colocate" or cfg.train.max_staleness > 0:
        return False
    from grpo_code.generation.vllm import cpu_build

    return cpu_build()


def run_training(cfg: RunConfig, resume: Path | None = None, log: Callable[[str], None] = print,
                 console: Any = None) -> TrainSummary:
    """Train with GRPO as configured; returns where the model went and how the reward moved."""
    if cfg.generation.backend == "openai":
        raise TrainError("training cannot generate through the openai backend",
                         "use generation.backend=hf (CPU/GPU) or vllm (GPU)")
    if cfg.generation.backend == "vllm":
        from grpo_code.generation.vllm import prepare_environment

        prepare_environment()  # before TRL imports vLLM
    # TRL validates its settings first: a run directory is only made for settings that hold.
    grpo_args(cfg, Path(cfg.output.dir or "runs"))
    cfg, run_dir, checkpoint = prepare_run_once(cfg, resume)
    started = time.monotonic()
    with terminate_as_interrupt():
        return _train(cfg, run_dir, checkpoint, started, log, console)


@contextlib.contextmanager
def terminate_as_interrupt() -> Any:
    """SIGTERM ends the run as Ctrl-C does: its ``finally`` blocks stop the rollout worker
    and the sandbox pool (the default action would end the process without them)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _train(cfg: RunConfig, run_dir: Path, checkpoint: Path | None, started: float, log: Callable[[str], None],
           console: Any) -> TrainSummary:

    import warnings

    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, PrinterCallback, ProgressCallback
    from transformers.utils import logging as hf_logging

    # transformers' deprecation notices about its own internals (called by TRL) are not the user's business.
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    hf_logging.disable_progress_bar()

    from grpo_code.generation.base import prompt_style, resolve, torch_dtype
    from grpo_code.rewards.functions import build_reward_funcs, reward_verifier
    from grpo_code.rewards.judge import build_judge
    from grpo_code.sandbox import Sandbox
    from grpo_code.tasks import load_suite, render
    from grpo_code.verify import oracle
    from grpo_code.training.callbacks import MetricsLog, ProgressBar
    from grpo_code.training.filter import PromptFilter
    from grpo_code.training.packing import trim_padding_for
    from grpo_code.training.rollout_log import RolloutLog
    from grpo_code.training.rollouts import PromptIndex, Rollouts, training_sampling
    from grpo_code.training.trainer import GrpoCodeTrainer
    from grpo_code.verify.attested import script_tasks
    from grpo_code.verify.audit import audited_weak
    from grpo_code.verify.early import EarlyJobs

    suite = load_suite(cfg.tasks.suite, cfg.tasks.paths)
    train_tasks = suite.split(cfg.tasks.train_split)
    args = grpo_args(cfg, run_dir)
    training_sampling(args)  # settings the rollouts do not implement are refused before anything loads
    resolved = resolve(cfg.model.name, log)
    if resolved.adapter:
        raise TrainError(f"{cfg.model.name} is a LoRA adapter", "train from its base model with model.peft set")
    tokenizer = AutoTokenizer.from_pretrained(resolved.tokenizer_path, trust_remote_code=cfg.model.trust_remote_code)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    style = prompt_style(tokenizer)
    system_prompt = cfg.tasks.system_prompt if cfg.tasks.system_prompt is not None else suite.system_prompt
    model = AutoModelForCausalLM.from_pretrained(resolved.path, dtype=torch_dtype(cfg.model.dtype),
                                                 trust_remote_code=cfg.model.trust_remote_code)
    trim_padding = trim_padding_for(model, cfg.train.trim_padding, log)
    peft_config = None
    if cfg.model.peft:
        from peft import LoraConfig

        try:
            peft_config = LoraConfig(task_type="CAUSAL_LM", **cfg.model.peft)
        except TypeError as exc:
            raise ConfigError([f"model.peft: {exc}"]) from None

    metrics = MetricsLog(run_dir / "metrics.jsonl")
    prompt_filter = None
    if cfg.train.filter.enabled:
        prompt_filter = PromptFilter(cfg.train.filter.history, cfg.train.filter.skip_prob, cfg.train.seed)
    with Sandbox(cfg.sandbox) as sandbox, contextlib.ExitStack() as stack:
        log(f"sandbox: {sandbox.backend} backend, {sandbox.workers} workers")
        train_tasks = audited_weak(suite, train_tasks, cfg.tasks.exclude_weak, cfg.tasks.min_mutation_score, log)
        train_tasks = oracle.prepare(train_tasks, sandbox, log)
        rows = [{"prompt": render(t, style, system_prompt, suite.prompt_template).for_trl(), "task_id": t.id}
                for t in train_tasks.tasks]
        dataset = Dataset.from_list(rows)
        index = PromptIndex(rows)
        if index.shared:
            log(f"note: {len(index.shared)} training prompt(s) are shared by several tasks: their completions "
                "are scored after generation, by each row's own task")
        multi_turn_on = cfg.train.multi_turn.turns > 1
        # A multi-turn rollout's reward is on the hidden tests (those no feedback can quote).
        scored_tasks = train_tasks if not multi_turn_on else dataclasses.replace(
            train_tasks, tasks=tuple(dataclasses.replace(t, tests=t.hidden_tests or t.tests) for t in train_tasks.tasks))
        verifier = reward_verifier(cfg.rewards, sandbox, scored_tasks, extract=cfg.tasks.extract)
        native_scripts = script_tasks(scored_tasks)
        if native_scripts and not cfg.rewards.tests.trust_unattested:
            log(f"warning: {len(native_scripts)} of {len(scored_tasks.tasks)} tasks of suite {suite.name} have script "
                "tests judged inside the program's process (unattested): their passes count as fails "
                f"(rewards.tests.trust_unattested, docs/rewards.md): {', '.join(native_scripts[:5])}")
        multi = multi_turn(cfg, style, index, verifier, log)
        judge = build_judge(cfg.rewards.judge, scored_tasks)
        early = (EarlyJobs(verifier, style, on_program=judge.early if judge is not None else None)
                 if cfg.rewards.overlap and multi is None else None)
        rollouts = multi or Rollouts(index, verifier, style, early, stop_after_code=cfg.train.stop_after_code)
        worker = None
        if cfg.train.max_staleness > 0:
            from grpo_code.training.ahead import AheadRollouts, start_worker

            worker = start_worker(cfg, resolved, model, tokenizer, rows, scored_tasks, verifier, style, early, args,
                                  resumed=checkpoint is not None, log=log)
            stack.callback(worker.close)
            rollouts = AheadRollouts(index, rows, worker, cfg.train.max_staleness)
        funcs = build_reward_funcs(cfg.rewards, verifier, style=style, turn_cost=cfg.train.multi_turn.turn_cost,
                                   judge=judge, log=RolloutLog(run_dir / "completions.jsonl", prompt_filter,
                                                               args.num_generations))
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is TRL's public hook for this
        trainer = GrpoCodeTrainer(
            model=model, reward_funcs=funcs, args=args, train_dataset=dataset, processing_class=tokenizer,
            peft_config=peft_config, callbacks=[metrics, ProgressBar(console)], prompt_filter=prompt_filter,
            rollout_func=rollouts, trim_padding=trim_padding, skip_zero_advantage=cfg.train.skip_zero_advantage,
            row_seeds=cfg.generation.row_seeds,
        )
        if worker is not None:
            from grpo_code.training.ahead import WeightPush, probe_ids

            push = WeightPush(worker, trainer, probe_ids(tokenizer), 1.0)
            trainer.use_engine(push, ahead=True)
            rollouts.push = push
            worker.wait_ready()
        elif own_colocated_engine(cfg):
            from grpo_code.training.colocated import start_colocated

            start_colocated(cfg, resolved, model, tokenizer, rows, trainer, log)
        # Our progress bar and metrics.jsonl replace the Trainer's printed log dicts.
        trainer.remove_callback(PrinterCallback)
        trainer.remove_callback(ProgressCallback)
        if checkpoint and prompt_filter is not None and not trainer.restore_filter(checkpoint):
            log(f"note: {checkpoint} holds no prompt filter state: the filter starts with no history, so the "
                "prompts drawn from here differ from an uninterrupted run's")
        try:
            trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        finally:
            verifier.close()
            if judge is not None:
                judge.judge.close()
        if worker is not None:
            from grpo_code.training.ahead import staleness_line

            log(staleness_line(rollouts.staleness_counts))
        final = run_dir / "final"
        trainer.save_model(str(final))
        if trainer.accelerator.is_main_process:
            tokenizer.save_pretrained(str(final))
    # From metrics.jsonl, so a resumed run is summarized whole (this process saw only its own steps).
    logged = read_metrics(metrics.path)
    rewards = step_values(logged, M.REWARD) or metrics.rewards
    passes = step_values(logged, M.PASS_RATE) or metrics.pass_rates
    first, last = quarters(rewards, passes)
    return TrainSummary(run_dir, final, trainer.state.global_step, first, last, time.monotonic() - started)


def multi_turn(cfg: RunConfig, style: str, index: Any, verifier: Any, log: Callable[[str], None]) -> Any:
    """The multi-turn rollout of ``train.multi_turn`` (``None``: single-turn), with what it turns off said."""
    mt = cfg.train.multi_turn
    if mt.turns <= 1:
        return None
    from grpo_code.verify.feedback import DEFAULT_TEMPLATE, check_template
    from grpo_code.training.multiturn import MultiTurnRollout

    if style != "chat":
        raise TrainError(f"train.multi_turn.turns={mt.turns} needs a chat model: {cfg.model.name} has no chat template",
                         "train an instruct model, or set train.multi_turn.turns=1")
    template = mt.feedback_template or DEFAULT_TEMPLATE
    check_template(template)
    if cfg.rewards.overlap:
        log("note: multi-turn rollouts score the last answer once the rollout is over (rewards.overlap's early "
            "scoring is off); each turn's checks still start as rows end")
    return MultiTurnRollout(index, verifier, mt.turns, template)


def _steps(w: Window, end: str) -> str:
    return f"{end} step" if w.steps == 1 else f"{end} {w.steps} steps"


def _reward(w: Window) -> str:
    return f"{w.reward:.3f}" if w.reward_se is None else f"{w.reward:.3f} ± {w.reward_se:.3f}"


def change_lines(first: Window | None, last: Window | None, steps: int) -> list[str]:
    """The reward of the first and last quarter of steps, and in words whether the change is noise."""
    check = "`python scripts/learning_check.py` is the test of learning"
    short = (f"{steps} step{'' if steps == 1 else 's'} show{'s' if steps == 1 else ''} that the pipeline runs, "
             f"not that the model learns: {check}")
    if first is None or last is None:
        return ["no reward was logged"]
    if first.start == last.start:  # one logged step: both quarters are that step
        rate = "" if first.pass_rate is None else f"; pass rate {first.pass_rate:.3f}"
        return [f"reward {first.reward:.3f} (one step){rate}: nothing to compare", short]
    passed = "" if first.pass_rate is None or last.pass_rate is None else (
        f"; pass rate {first.pass_rate:.3f} -> {last.pass_rate:.3f}")
    change = (f"reward {_reward(first)} ({_steps(first, 'first')}) -> "
              f"{_reward(last)} ({_steps(last, 'last')}){passed}")
    if first.reward_se is None or last.reward_se is None:
        return [f"{change}: too few steps to tell a change from noise",
                short]
    diff = last.reward - first.reward
    se = math.sqrt(first.reward_se ** 2 + last.reward_se ** 2)
    if abs(diff) < 2 * se or diff == 0:
        return [f"{change}: the change is within noise (|diff| {abs(diff):.3f} < 2 SE = {2 * se:.3f})",
                short]
    size = f"{abs(diff) / se:.1f} SE" if se > 0 else "more than 2 SE"
    way = "rose" if diff > 0 else "fell"
    return [f"{change}: the reward {way} beyond noise ({diff:+.3f}, {size})",
            "that is the reward on the training prompts; held-out pass@k (`grpo-code eval`) tells whether "
            f"the model learned, and on the demo {check}"]


def summary_lines(s: TrainSummary, suite: str) -> list[str]:
    return [
        f"trained {s.steps} steps in {s.wall_s / 60:.1f} min; run directory {s.run_dir}",
        *change_lines(s.first, s.last, s.steps),
        f"model saved to {s.final_dir}",
        f"evaluate it: grpo-code eval {s.final_dir} --tasks {suite} --n 4 --k 1,4",
    ]
