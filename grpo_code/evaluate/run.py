"""``grpo-code eval`` as one call: settle the settings, check every input, then evaluate.

:func:`run` takes an :class:`EvalRequest` (the command line's choices over a run config).
Everything a user can get wrong (suite, split, k, a samples file, a model's name) is
checked before the sandbox starts or the progress display shows, so bad input is one
error line and nothing is lost. It then evaluates each model (:func:`eval_model`) or scores
a samples file (:func:`score_samples`); :func:`print_results` prints the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_code.evaluate.files import slug
from grpo_code.evaluate.score import (
    SAMPLES_N_IS,
    EvalError,
    EvalSettings,
    Hooks,
    eval_model,
    samples_n,
    score_samples,
    usable_ks,
)
from grpo_code.evaluate.summary import EvalSummary, TurnsSummary
from grpo_code.verify.feedback import DEFAULT_TEMPLATE, check_template
from grpo_code.tasks.samples import read_samples_file

if TYPE_CHECKING:
    from rich.console import Console

    from grpo_code.config import RunConfig, SandboxConfig
    from grpo_code.tasks.suite import Suite


@dataclass(frozen=True)
class EvalRequest:
    """What to evaluate and how; ``None`` takes the run config's value (``eval.*``,
    ``generation.*``, ``tasks.*``, ``sandbox.backend``)."""

    config: RunConfig
    models: tuple[str, ...] = ()
    """Short names, hub ids, checkpoint or LoRA adapter directories; none: ``model.name``."""
    samples: Path | None = None
    """Score this samples file instead of generating (then no models)."""
    tasks: str | None = None
    split: str | None = None
    """Default: ``tasks.eval_split``; with a samples file, every task it holds."""
    n: int | None = None
    ks: tuple[int, ...] | None = None
    temperature: float | None = None
    max_new_tokens: int | None = None
    backend: str | None = None
    server_url: str | None = None
    batch_size: int | None = None
    seed: int | None = None
    stop_after_code: bool = False
    out: Path | None = None
    """Default: ``evals/<suite>-<split>-n<N>-t<T>-s<seed>``, or ``evals/samples-<file>-<suite>``."""
    sandbox_backend: str | None = None
    turns: int | None = None
    """Answers per sample with execution feedback between them (default: ``eval.turns``)."""


@dataclass(frozen=True)
class EvalResult:
    """What :func:`run` measured."""

    summaries: dict[str, EvalSummary]
    """One summary per model (or ``samples:<file name>``), in the order asked."""
    ks: tuple[int, ...]
    """The k values reported: those defined for the samples per task."""
    models_dir: Path | None
    """Holds one ``<model>/`` directory per model; ``None`` when a samples file was scored."""


@dataclass(frozen=True)
class _Plan:
    """Everything checked, nothing started."""

    suite: Suite
    ks: list[int]
    out: Path
    models: list[EvalSettings]
    sandbox: SandboxConfig


def parse_ks(text: str) -> tuple[int, ...]:
    """``"1,5,10"`` -> (1, 5, 10); an error naming ``--k`` otherwise."""
    try:
        ks = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise EvalError(f"--k {text!r} is not a list of integers", "write e.g. --k 1,5,10") from None
    if not ks:
        raise EvalError("--k is empty", "write e.g. --k 1,5,10")
    return ks


def _plan(r: EvalRequest, note: Callable[[str], None]) -> _Plan:
    from grpo_code.generation.base import model_prompt_style
    from grpo_code.tasks import load_suite

    cfg = r.config
    ks = list(cfg.eval.k if r.ks is None else r.ks)
    # A samples file is scored on the tasks it holds unless a split is asked for.
    split = r.split if r.split is not None else ("all" if r.samples is not None else cfg.tasks.eval_split)
    suite = load_suite(r.tasks or cfg.tasks.suite, cfg.tasks.paths).split(split)
    n = r.n or cfg.eval.n
    temperature = cfg.generation.temperature if r.temperature is None else r.temperature
    seed = cfg.eval.seed if r.seed is None else r.seed
    backend = r.backend or cfg.generation.backend
    sandbox = cfg.sandbox if r.sandbox_backend is None else replace(cfg.sandbox, backend=r.sandbox_backend)
    if r.samples is not None:
        if r.models:
            raise EvalError("give either models or --samples, not both", "run them as two evals")
        ks = usable_ks(ks, samples_n(read_samples_file(r.samples, suite)), note, SAMPLES_N_IS)
        out = r.out or Path("evals") / slug(f"samples-{r.samples.stem}-{suite.name}")
    else:
        ks = usable_ks(ks, n, note)
        out = r.out or Path("evals") / slug(f"{suite.name}-{split or 'all'}-n{n}-t{temperature}-s{seed}")
    turns = cfg.eval.turns if r.turns is None else r.turns
    if turns < 1:
        raise EvalError(f"--turns {turns} < 1", "give the number of answers per sample, e.g. --turns 2")
    if turns > 1 and r.samples is not None:
        raise EvalError("--turns needs a model to answer the feedback, not a samples file", "drop --turns")
    template = cfg.eval.feedback_template or DEFAULT_TEMPLATE
    if turns > 1:
        check_template(template)
    if r.stop_after_code and (r.samples is not None or backend not in ("hf", "vllm")):
        raise EvalError(f"--stop-after-code needs generation with the hf or vllm backend, not {backend}",
                        "drop --stop-after-code, or use --backend hf or vllm")
    models = [] if r.samples is not None else [EvalSettings(
        model=name, suite=suite.name, suite_hash=suite.content_hash(), split=split, n=n,
        temperature=temperature, top_p=cfg.generation.top_p, top_k=cfg.generation.top_k,
        row_seeds=cfg.generation.row_seeds,
        max_new_tokens=r.max_new_tokens or cfg.generation.max_new_tokens, seed=seed, backend=backend,
        batch_size=r.batch_size or cfg.generation.batch_size, style=model_prompt_style(backend, name),
        extract=cfg.tasks.extract, system_prompt=cfg.tasks.system_prompt, stop_after_code=r.stop_after_code,
        turns=turns, feedback_template=template)
        for name in r.models or (cfg.model.name,)]
    raw = [s.model for s in models if s.turns > 1 and s.style != "chat"]
    if raw:
        raise EvalError(f"--turns needs a chat model: {raw[0]} has no chat template",
                        "evaluate an instruct model, or drop --turns")
    return _Plan(suite, ks, out, models, sandbox)


def run(request: EvalRequest, console: Console | None = None) -> EvalResult:
    """Check the request, then evaluate each model (or score the samples file) with a
    progress display and notes on ``console`` (default: stderr). Reruns resume."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from grpo_code.generation import load_generator
    from grpo_code.sandbox import Sandbox
    from grpo_code.verify import oracle

    err = console or Console(stderr=True)

    def note(text: str) -> None:
        err.print(f"note: {text}", highlight=False, markup=False, soft_wrap=True)

    plan = _plan(request, note)
    cfg = request.config
    summaries: dict[str, EvalSummary] = {}
    with Sandbox(plan.sandbox) as sandbox, Progress(TextColumn("{task.description:>9}"), BarColumn(),
                                                    MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                                                    console=err) as bar:
        suite = oracle.prepare(plan.suite, sandbox, note)  # expected values from references, where tasks need them
        ids: dict[str, Any] = {}

        def start(what: str, total: int) -> None:
            if total:
                ids[what] = bar.add_task(what, total=total)

        def advance(what: str, amount: int) -> None:
            if what in ids:
                bar.advance(ids[what], amount)

        hooks = Hooks(start, advance, note)
        if request.samples is not None:
            kept = {t.id for t in suite.tasks}
            summaries[f"samples:{request.samples.name}"] = score_samples(
                request.samples, suite, plan.ks, plan.out, sandbox, hooks, cfg.tasks.extract,
                left_out=[t.id for t in plan.suite.tasks if t.id not in kept])
        for settings in plan.models:

            def factory(settings: EvalSettings = settings) -> Any:
                from grpo_code.generation.vllm import engine_dtype

                dtype = (engine_dtype(cfg.generation.vllm_dtype, cfg.model.dtype) if settings.backend == "vllm"
                         else cfg.model.dtype)
                return load_generator(settings.backend, settings.model, dtype=dtype,
                                      batch_size=settings.batch_size,
                                      server_url=request.server_url or cfg.generation.server_url,
                                      vllm_gpu_memory_utilization=cfg.generation.vllm_gpu_memory_utilization,
                                      log=err.print)

            summaries[settings.model] = eval_model(factory, settings, suite, plan.ks, plan.out / slug(settings.model),
                                                   sandbox, hooks)
    return EvalResult(summaries, tuple(plan.ks), None if request.samples is not None else plan.out)


def print_results(result: EvalResult, console: Console | None = None) -> None:
    """The pass@k table (one row per model, with 95% intervals and the no-code share), the
    tasks without samples, and where the outputs are."""
    from rich.console import Console
    from rich.table import Table

    first = next(iter(result.summaries.values()))
    in_suite, missing = first.tasks_in_suite, first.missing_tasks
    table = Table(title=f"{first.suite}: pass@k over {first.tasks}/{in_suite} tasks (hash {first.suite_hash})")
    table.add_column("model", overflow="fold")
    table.add_column("n", justify="right")
    for k in result.ks:
        table.add_column(f"pass@{k}", justify="right")
        table.add_column("95% CI", justify="right")
    table.add_column("no code", justify="right")
    for name, s in result.summaries.items():
        row = [name, str(s.n)]
        for k in result.ks:
            lo, hi = s.ci95[k]
            row += [f"{s.pass_at_k[k]:.3f}", f"{lo:.3f}-{hi:.3f}"]
        row.append(f"{s.verdicts.get('no_code', 0)}/{s.samples}")
        table.add_row(*row)
    out = console or Console()
    out.print(table)
    if missing:
        out.print(f"{len(missing)} of {in_suite} tasks have no samples and are not counted: "
                  f"{', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''} (summary.json: missing_tasks)",
                  highlight=False, markup=False, soft_wrap=True)
    for name, s in result.summaries.items():
        if s.turns is not None:
            out.print(turn_line(name, s.turns), highlight=False, markup=False, soft_wrap=True)
    if result.models_dir is not None:
        later = ", turns.jsonl, turn_results.jsonl" if any(s.turns for s in result.summaries.values()) else ""
        out.print(f"outputs: {result.models_dir}/<model>/summary.json, samples.jsonl, results.jsonl{later}")


def turn_line(name: str, turns: TurnsSummary) -> str:
    """``model: pass@1 by turn 0.200 -> 0.300; 1.6 turns per sample; answers per turn 20, 12``."""
    rates = " -> ".join(f"{r:.3f}" for r in turns.pass_at_1)
    ran = ", ".join(str(n) for n in turns.samples_per_turn)
    return f"{name}: pass@1 by turn {rates}; {turns.mean_turns:.2f} turns per sample; answers per turn {ran}"
