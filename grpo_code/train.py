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
from grpo_code.training.engines import EngineKind, engine_kind


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
    held_out: list[tuple[int, float]] = dataclasses.field(default_factory=list)
    """``(policy version, held-out pass@1)`` of each held-out eval (``train.eval_every``)."""


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
    kind = engine_kind(cfg)
    if kind is EngineKind.AHEAD:
        # The rollout worker is the engine (grpo_code.training.ahead); TRL builds none. Its
        # log-probs are weighed token by token: a sequence ratio masks long programs.
        defaults["use_vllm"] = False
        defaults["vllm_importance_sampling_mode"] = "token_truncate"
    elif gen.backend == "vllm":
        defaults["vllm_mode"] = gen.vllm_mode
        if kind is EngineKind.COLOCATED:
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
    """The composition root: the run's parts, each closed in reverse order on an exit stack
    (on success, error and Ctrl-C): sandbox, verifier, judge, rollout engine."""
    from grpo_code.sandbox import Sandbox
    from grpo_code.training.callbacks import MetricsLog, ProgressBar
    from grpo_code.training.engines import EngineParts
    from grpo_code.training.parts import (
        HeldOutPart,
        Scoring,
        build_engine,
        build_prompt_filter,
        build_rollouts,
        load_policy,
        load_run_suite,
        quiet_transformers,
        training_data,
    )
    from grpo_code.training.trainer import GrpoCodeTrainer
    from grpo_code.verify import oracle
    from grpo_code.verify.audit import audited_weak

    quiet_transformers()
    from transformers import PrinterCallback, ProgressCallback

    suite = load_run_suite(cfg)
    args = grpo_args(cfg, run_dir)
    policy = load_policy(cfg, args, log)
    metrics = MetricsLog(run_dir / "metrics.jsonl")
    prompt_filter = build_prompt_filter(cfg)
    kind = engine_kind(cfg)
    with contextlib.ExitStack() as stack:
        sandbox = stack.enter_context(Sandbox(cfg.sandbox))
        log(f"sandbox: {sandbox.backend} backend, {sandbox.workers} workers")
        train_tasks = audited_weak(suite, suite.split(cfg.tasks.train_split), cfg.tasks.exclude_weak,
                                   cfg.tasks.min_mutation_score, log)
        train_tasks = oracle.prepare(train_tasks, sandbox, log)
        data = training_data(cfg, suite, train_tasks, policy.style, log)
        scoring = stack.enter_context(Scoring.build(cfg, sandbox, data, policy.style, log))
        held_out = stack.enter_context(HeldOutPart.build(cfg, suite, sandbox, policy, metrics.write, log)).held
        engine = build_engine(kind, EngineParts(cfg, args, policy.resolved, policy.model, policy.tokenizer,
                                                data.rows, log, tasks=data.scored, verifier=scoring.verifier,
                                                style=policy.style, early=scoring.early,
                                                resumed=checkpoint is not None,
                                                held_tasks=held_out.verifier.tasks if held_out else {}))
        stack.callback(engine.close)
        rollouts = build_rollouts(cfg, kind, data, scoring, engine, log, held_out)
        trainer = GrpoCodeTrainer(
            model=policy.model, reward_funcs=scoring.reward_funcs(cfg, run_dir, prompt_filter, args),
            args=args, train_dataset=data.dataset, processing_class=policy.tokenizer,
            peft_config=policy.peft_config, callbacks=[metrics, ProgressBar(console)], prompt_filter=prompt_filter,
            rollout_func=rollouts, trim_padding=policy.trim_padding,
            skip_zero_advantage=cfg.train.skip_zero_advantage,
        )
        trainer.use_engine(engine)
        if kind is EngineKind.AHEAD:
            engine.wait_ready()
        # Our progress bar and metrics.jsonl replace the Trainer's printed log dicts.
        trainer.remove_callback(PrinterCallback)
        trainer.remove_callback(ProgressCallback)
        if checkpoint and prompt_filter is not None and not trainer.restore_filter(checkpoint):
            log(f"note: {checkpoint} holds no prompt filter state: the filter starts with no history, so the "
                "prompts drawn from here differ from an uninterrupted run's")
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        if held_out is not None:
            from grpo_code.training.held_out import final_eval

            final_eval(held_out, engine, trainer, cfg.train.stop_after_code)
        if kind is EngineKind.AHEAD:
            from grpo_code.training.ahead import staleness_line

            log(staleness_line(rollouts.staleness_counts))
        final = run_dir / "final"
        trainer.save_model(str(final))
        if trainer.accelerator.is_main_process:
            policy.tokenizer.save_pretrained(str(final))
    # From metrics.jsonl, so a resumed run is summarized whole (this process saw only its own steps).
    logged = read_metrics(metrics.path)
    rewards = step_values(logged, M.REWARD) or metrics.rewards
    passes = step_values(logged, M.PASS_RATE) or metrics.pass_rates
    first, last = quarters(rewards, passes)
    return TrainSummary(run_dir, final, trainer.state.global_step, first, last, time.monotonic() - started,
                        held_out=step_values(logged, M.EVAL_PASS1))


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
        *([held_out_line(s.held_out)] if s.held_out else []),
        f"model saved to {s.final_dir}",
        f"evaluate it: grpo-code eval {s.final_dir} --tasks {suite} --n 4 --k 1,4",
    ]


def held_out_line(points: list[tuple[int, float]]) -> str:
    """The held-out pass@1 curve of ``train.eval_every``, by policy version."""
    return "held-out pass@1 by policy version: " + ", ".join(f"v{v} {p:.3f}" for v, p in points)
