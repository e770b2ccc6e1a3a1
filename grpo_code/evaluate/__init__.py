"""Evaluation: n samples per task -> sandbox -> pass@k, resumable, with the training pipeline.

:func:`run` is ``grpo-code eval`` as one call (:mod:`~grpo_code.evaluate.run`); it checks
every input, then evaluates each model with :func:`eval_model` or scores a samples file
with :func:`score_samples` (:mod:`~grpo_code.evaluate.score`). For each model,
``<out>/<model-slug>/`` holds

- ``config.json``: the settings, written before anything else; a rerun with other
  settings is refused (naming the keys) so a resume never mixes samples;
- ``samples.jsonl``: append-only completions keyed by (task_id, index), marked
  ``truncated`` when the backend cut one at the length limit; prompts are
  generated in fixed seeded chunks (:func:`~grpo_code.generation.base.seeded_chunks`), so a
  killed run resumes to the same samples;
- ``results.jsonl``: per-sample verdicts with the first failing test (its verdict and
  message), appended as jobs finish and keyed by the sample, the program it gave and the
  harness fingerprint (:mod:`~grpo_code.sandbox.fingerprint`), so verdicts of another
  extraction rule, sandbox runtime or other limits are not reused; sandbox infrastructure
  errors are not written, so a rerun retries them; every verdict comes from the one
  verifier training uses (:mod:`grpo_code.verify`), so a completion cut inside its program
  is ``unfinished`` (not run, not passed) here as it is in a reward;
- ``summary.json``: pass@k (unbiased estimator, :mod:`~grpo_code.evaluate.stats`), a 95%
  bootstrap interval over tasks, per-task counts, the verdict mix and the suite's content hash.

``score_samples`` does the same for an existing samples file, without a model
(:func:`~grpo_code.tasks.samples.read_samples_file`,
:func:`~grpo_code.tasks.samples.program_from_completion`). pass@k is over the tasks the
file holds; the suite's other tasks are listed as missing, never silently dropped.
"""

from grpo_code.evaluate.files import slug
from grpo_code.evaluate.run import EvalRequest, EvalResult, parse_ks, print_results, run
from grpo_code.evaluate.score import (
    SAMPLES_N_IS,
    EvalError,
    EvalSettings,
    Hooks,
    eval_model,
    missing_note,
    samples_n,
    score_samples,
    usable_ks,
)
from grpo_code.evaluate.stats import bootstrap_ci, pass_at_k, summarize
from grpo_code.evaluate.summary import EvalSummary, TaskCount, TurnsSummary

__all__ = [
    "SAMPLES_N_IS", "EvalError", "EvalRequest", "EvalResult", "EvalSettings", "EvalSummary", "Hooks", "TaskCount",
    "TurnsSummary", "bootstrap_ci", "eval_model", "missing_note", "parse_ks", "pass_at_k", "print_results", "run",
    "samples_n", "score_samples", "slug", "summarize", "usable_ks",
]
