"""Training: prompt filtering, run directories and resume rules, and a real GRPO run on CPU
(a tiny locally built model, tests/tiny_model.py, through the Docker sandbox)."""

from __future__ import annotations

import io
import itertools
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import tiny_model
from typer.testing import CliRunner

from grpo_code.cli import app
from grpo_code.config import load_config
from grpo_code.errors import ConfigError, GrpoCodeError
from grpo_code.report.load import quarters, read_metrics, step_values
from grpo_code.tasks import load_suite
from grpo_code.train import (
    TrainError,
    TrainSummary,
    change_lines,
    config_diff,
    grpo_args,
    last_checkpoint,
    prepare_run,
    summary_lines,
)
from grpo_code.training.callbacks import ProgressBar
from grpo_code.training.filter import FilteringSampler, PromptFilter
from grpo_code.verify.verifier import Verifier

runner = CliRunner()


def steps_of(values: list[float]) -> list[tuple[int, float]]:
    return list(enumerate(values, start=1))


def test_summary_of_a_noisy_short_run_says_the_change_is_noise() -> None:
    # The demo: rewards that fall from first to last quarter by less than 2 SE.
    rewards = [0.25, 0.5, 0.25, 0.2, 0.4, 0.15, 0.3, 0.1, 0.2, 0.0, 0.25, 0.15]
    passes = [0.25, 0.25, 0.0, 0.0, 0.25, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    first, last = quarters(steps_of(rewards), steps_of(passes))
    assert first is not None and last is not None
    assert (first.steps, last.steps) == (3, 3)
    assert first.reward == pytest.approx(1 / 3) and last.reward == pytest.approx(0.4 / 3)
    assert first.reward_se == pytest.approx(0.0833333, abs=1e-6)  # sample SD 0.1443 / sqrt(3)
    assert last.reward_se == pytest.approx(0.0726483, abs=1e-6)
    assert first.pass_rate == pytest.approx(1 / 6) and last.pass_rate == 0.0
    lines = change_lines(first, last, 12)
    assert lines[0] == ("reward 0.333 ± 0.083 (first 3 steps) -> 0.133 ± 0.073 (last 3 steps); "
                        "pass rate 0.167 -> 0.000: the change is within noise (|diff| 0.200 < 2 SE = 0.221)")
    assert lines[1] == ("12 steps show that the pipeline runs, not that the model learns: "
                        "`python scripts/learning_check.py` is the test of learning")


def test_summary_names_a_rise_and_a_fall_beyond_noise() -> None:
    up = [0.1, 0.12, 0.08, 0.3, 0.4, 0.5, 0.6, 0.62, 0.58]  # quarters of 2 steps
    lines = change_lines(*quarters(steps_of(up), []), 9)
    assert lines[0] == ("reward 0.110 ± 0.010 (first 2 steps) -> 0.600 ± 0.020 (last 2 steps): "
                        "the reward rose beyond noise (+0.490, 21.9 SE)")
    assert "held-out pass@k (`grpo-code eval`)" in lines[1] and "scripts/learning_check.py" in lines[1]
    down = change_lines(*quarters(steps_of(up[::-1]), []), 9)
    assert "the reward fell beyond noise (-0.490, 21.9 SE)" in down[0]
    # No spread within either quarter and a difference: beyond noise, but no ratio to print.
    flat = change_lines(*quarters(steps_of([0.0, 0.0, 1.0, 1.0]), []), 4)
    assert flat[0].endswith("(first step) -> 1.000 (last step): too few steps to tell a change from noise")
    flat = change_lines(*quarters(steps_of([0.0] * 4 + [1.0] * 4), []), 8)
    assert flat[0].endswith("the reward rose beyond noise (+1.000, more than 2 SE)")
    same = change_lines(*quarters(steps_of([0.5] * 8), []), 8)
    assert "the change is within noise (|diff| 0.000 < 2 SE = 0.000)" in same[0]


def test_summary_of_one_step_and_of_no_reward(tmp_path: Path) -> None:
    lines = change_lines(*quarters([(1, 0.25)], [(1, 0.5)]), 1)
    assert lines == ["reward 0.250 (one step); pass rate 0.500: nothing to compare",
                     "1 step shows that the pipeline runs, not that the model learns: "
                     "`python scripts/learning_check.py` is the test of learning"]
    two = change_lines(*quarters([(1, 0.25), (2, 0.75)], []), 2)
    assert two[0] == "reward 0.250 (first step) -> 0.750 (last step): too few steps to tell a change from noise"
    alike = change_lines(*quarters([(1, 0.5), (2, 0.5)], [(1, 0.0), (2, 0.0)]), 2)  # two steps, equal numbers
    assert alike[0] == ("reward 0.500 (first step) -> 0.500 (last step); pass rate 0.000 -> 0.000: "
                        "too few steps to tell a change from noise")
    assert quarters([], []) == (None, None)
    summary = TrainSummary(tmp_path, tmp_path / "final", 0, None, None, 90.0)
    lines = summary_lines(summary, "demo")
    assert lines[0] == f"trained 0 steps in 1.5 min; run directory {tmp_path}"
    assert lines[1] == "no reward was logged"
    assert lines[-1] == f"evaluate it: grpo-code eval {tmp_path / 'final'} --tasks demo --n 4 --k 1,4"


def test_metrics_are_read_keeping_a_redone_steps_last_value(tmp_path: Path) -> None:
    def series(path: Path) -> list[tuple[int, float]]:
        return step_values(read_metrics(path), "reward")

    path = tmp_path / "metrics.jsonl"
    rows = [{"step": 1, "reward": 0.1}, {"step": 2, "reward": 0.2}, {"step": 2, "loss": 1.0},
            {"step": 2, "reward": 0.3}, {"step": 3, "train_runtime": 5.0}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + '\n{"step": 4, "rew')  # torn by a kill
    assert series(path) == [(1, 0.1), (2, 0.3)]
    assert series(tmp_path / "none.jsonl") == []
    # A damaged line that is not the torn last one is named, not skipped.
    path.write_text("\n".join(json.dumps(r) for r in rows[:2]) + "\n{not json\n" + json.dumps(rows[3]) + "\n")
    with pytest.raises(GrpoCodeError, match=r"metrics.jsonl, line 3: not a JSON record"):
        series(path)


class FakeStream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def feed(bar: ProgressBar, steps: int = 3) -> None:
    """The events a trainer sends: begin, per step a log with the step's metrics, a final log, end."""
    state = SimpleNamespace(is_world_process_zero=True, global_step=0, max_steps=steps)
    bar.on_train_begin(None, state, None)
    for step in range(1, steps + 1):
        state.global_step = step
        bar.on_step_end(None, state, None)
        bar.on_log(None, state, None, logs={"loss": 0.1, "reward": step / 8, "tests/pass_rate": step / 16,
                                            "timing/step_s": 10.0 + step})
    bar.on_log(None, state, None, logs={"train_runtime": 33.0})  # the trainer's closing log: no line
    bar.on_train_end(None, state, None)


def test_progress_prints_one_flushed_line_per_step_when_output_is_not_a_terminal() -> None:
    from rich.console import Console

    out, err = FakeStream(tty=False), io.StringIO()
    feed(ProgressBar(Console(file=err), stream=out))
    assert out.getvalue().splitlines() == [
        "step 1/3  reward 0.125  pass 0.062  11.0 s",
        "step 2/3  reward 0.250  pass 0.125  12.0 s",
        "step 3/3  reward 0.375  pass 0.188  13.0 s",
    ]
    assert err.getvalue() == ""  # no bar on a console that is not a terminal


def test_progress_draws_a_bar_on_a_terminal_and_lines_only_where_output_is_redirected() -> None:
    from rich.console import Console

    # Both on a terminal: the bar alone.
    out, err = FakeStream(tty=True), io.StringIO()
    feed(ProgressBar(Console(file=err, force_terminal=True, width=120), stream=out))
    assert out.getvalue() == "" and "3/3" in err.getvalue() and "reward 0.375" in err.getvalue()
    # `grpo-code train > log` from a terminal: the bar on stderr, the lines in the log.
    out, err = FakeStream(tty=False), io.StringIO()
    feed(ProgressBar(Console(file=err, force_terminal=True, width=120), stream=out))
    assert len(out.getvalue().splitlines()) == 3 and "3/3" in err.getvalue()
    # stderr redirected, stdout a terminal: no bar can show, so the lines go to the terminal.
    out = FakeStream(tty=True)
    feed(ProgressBar(Console(file=io.StringIO()), stream=out), steps=2)
    assert out.getvalue().splitlines()[-1] == "step 2/2  reward 0.250  pass 0.125  12.0 s"


def test_progress_times_steps_by_the_clock_without_the_trainers_timing() -> None:
    from rich.console import Console

    out = FakeStream(tty=False)
    bar = ProgressBar(Console(file=io.StringIO()), stream=out)
    state = SimpleNamespace(is_world_process_zero=True, global_step=0, max_steps=1)
    bar.on_train_begin(None, state, None)
    state.global_step = 1
    bar.on_log(None, state, None, logs={"reward": 1.0})
    assert re.fullmatch(r"step 1/1  reward 1\.000  pass -  \d+\.\d s\n", out.getvalue())


def test_filter_skips_zero_advantage_tasks_and_reprobes() -> None:
    f = PromptFilter(history=2, skip_prob=1.0)
    f.record("a", [1.0, 1.0, 1.0, 1.0])
    assert f.admit("a")  # one all-pass group is not yet a history of them
    f.record("a", [1.0, 1.0, None, 1.0])
    assert not f.admit("a")
    f.record("a", [0.0, 1.0, 1.0, 1.0])  # the model changed: the task carries gradient again
    assert f.admit("a")
    f.record("b", [0.0, 0.0])
    f.record("b", [0.0, 0.0])
    sometimes = PromptFilter(history=1, skip_prob=0.5, seed=1)
    sometimes.record("b", [0.0, 0.0])
    admitted = sum(sometimes.admit("b") for _ in range(400))
    assert 140 < admitted < 260  # re-probed about half the time
    assert sometimes.take_counts() == (admitted, 400 - admitted) and sometimes.take_counts() == (0, 0)


def test_filtering_sampler_keeps_trl_repeat_pattern_and_avoids_dead_prompts() -> None:
    ids = [f"t{i}" for i in range(6)]
    f = PromptFilter(history=1, skip_prob=1.0)
    for dead in ("t0", "t1"):
        f.record(dead, [1.0, 1.0])
    sampler = FilteringSampler(range(6), ids, f, mini_repeat_count=2, batch_size=3, repeat_count=2, seed=0)
    out = list(sampler)
    assert len(out) == len(sampler) == 6 // 3 * 3 * 2 * 2
    first = out[:12]
    chunk = first[:6]
    assert first[6:] == chunk  # the chunk repeats (steps_per_generation / num_iterations)
    assert all(chunk[i] == chunk[i + 1] for i in range(0, 6, 2))  # each prompt twice in a row
    assert not {0, 1} & set(out)


def _filtered_run(steps: int, save_at: int | None = None, state: dict | None = None,
                  restore: bool = True) -> tuple[list[list[int]], dict | None]:
    """Prompts of each step of a Trainer-like loop over a filtering sampler (one batch of
    prefetch, as accelerate's data loader): from step 0, or resumed from ``state`` saved
    after step ``save_at``, skipping the batches already trained by iterating them again."""
    ids = [f"t{i}" for i in range(7)]
    f = PromptFilter(history=1, skip_prob=0.7, seed=3)
    sampler = FilteringSampler(range(7), ids, f, mini_repeat_count=2, batch_size=2, repeat_count=1, seed=5)
    per_epoch, width = 7 // 2, 4
    start = 0
    if state is not None:
        start = save_at
        if restore:
            state = json.loads(json.dumps(state))  # as prompt_filter.json holds it
            f.load_state_dict(state["filter"])
            sampler.load_state_dict(state["sampler"])
    taken: list[list[int]] = []
    saved = None
    step = start
    for epoch in range(start // per_epoch, 1 + steps // per_epoch):
        sampler.set_epoch(epoch)
        flat = iter(sampler)
        batches = iter(lambda flat=flat: list(itertools.islice(flat, width)), [])
        ahead = next(batches, None)
        skip = start % per_epoch if epoch == start // per_epoch else 0
        for i in itertools.count():
            batch, ahead = ahead, next(batches, None)  # the loader fetches the next batch with this one
            if batch is None or step >= steps:
                break
            if i < skip:
                continue
            taken.append(batch[::2])
            for index in batch[::2]:  # this step's rewards: all equal (no gradient) for some tasks
                f.record(ids[index], [1.0, 1.0] if (step + index) % 3 else [0.0, 1.0])
            step += 1
            if step == save_at and state is None:
                saved = {"filter": f.state_dict(), "sampler": sampler.state_dict()}
    return taken, saved


@pytest.mark.parametrize("save_at", [1, 3, 5, 6])  # mid-epoch, at an epoch's end, in a later epoch
def test_a_resumed_filtered_run_draws_the_prompts_of_an_uninterrupted_one(save_at: int) -> None:
    whole, state = _filtered_run(12, save_at)
    resumed, _ = _filtered_run(12, save_at, state)
    assert resumed == whole[save_at:]
    assert len(resumed) == 12 - save_at


def test_a_resume_without_the_filter_state_would_draw_other_prompts() -> None:
    whole, state = _filtered_run(12, 5)
    assert _filtered_run(12, 5, state, restore=False)[0] != whole[5:]


def test_config_diff_names_keys_but_not_the_run_dir() -> None:
    a = load_config(None).to_dict()
    b = load_config(None, ["sandbox.workers=3", "train.trl.max_steps=5", "output.dir=elsewhere"]).to_dict()
    assert config_diff(a, b) == ["sandbox.workers", "train.trl.max_steps"]


def test_resume_is_refused_for_a_changed_config(tmp_path: Path) -> None:
    cfg = load_config(None, [f"output.dir={tmp_path / 'run'}"])
    cfg, run_dir, ckpt = prepare_run(cfg, None)
    assert (run_dir / "config.yaml").is_file() and ckpt is None
    with pytest.raises(TrainError, match="already holds a run"):
        prepare_run(cfg, None)
    with pytest.raises(TrainError, match="no checkpoint"):
        prepare_run(cfg, run_dir)
    for step in (2, 10, 12):
        (run_dir / f"checkpoint-{step}").mkdir()
        if step != 12:  # checkpoint-12: a run stopped while saving it (trainer_state.json is written last)
            (run_dir / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    assert last_checkpoint(run_dir) == run_dir / "checkpoint-10"
    changed = load_config(None, [f"output.dir={run_dir}", "train.trl.learning_rate=1e-3", "eval.n=9"])
    with pytest.raises(TrainError, match=r"differs from the run in .*: eval.n, train.trl.learning_rate"):
        prepare_run(changed, run_dir)
    with pytest.raises(TrainError, match="not a run directory"):
        prepare_run(cfg, tmp_path)


def test_settings_that_fail_validation_leave_no_run_directory(tmp_path: Path) -> None:
    from grpo_code.train import run_training

    run = tmp_path / "run"
    cfg = load_config(None, [f"output.dir={run}", "train.trl.num_generations=3"])
    with pytest.raises(ConfigError, match="train.trl"):
        run_training(cfg, log=lambda _: None)
    assert not run.exists()  # so the corrected rerun does not find "a run" there


def test_trl_rejections_become_config_errors(tmp_path: Path) -> None:
    cfg = load_config(None, ["train.trl.no_such_option=1"])
    with pytest.raises(ConfigError, match="train.trl"):
        grpo_args(cfg, tmp_path)
    cfg = load_config(None, ["train.trl.num_generations=3"])  # must divide the generation batch (8)
    with pytest.raises(ConfigError, match="train.trl"):
        grpo_args(cfg, tmp_path)


def test_training_samples_like_eval(tmp_path: Path) -> None:
    # TRL alone would sample from every token; eval's generate keeps the 50 most likely.
    cfg = load_config(None, [])
    assert grpo_args(cfg, tmp_path).top_k == cfg.generation.top_k == 50
    assert grpo_args(load_config(None, ["generation.top_k=0"]), tmp_path).top_k == 0
    # One key per meaning: train.trl may not say a sampling setting again.
    with pytest.raises(ConfigError, match=r"train.trl.top_k: said once, as generation.top_k"):
        load_config(None, ["train.trl.top_k=7"])


def test_stop_after_code_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    # TRL would mask every completion stopped after its code: it has no end token.
    # Cross-field checks of load_config: `config validate` finds them too.
    with pytest.raises(ConfigError, match="exclude each other"):
        load_config(None, ["train.stop_after_code=true", "train.trl.mask_truncated_completions=true"])
    result = runner.invoke(app, ["train", "train.stop_after_code=true", "generation.backend=vllm",
                                 "generation.vllm_mode=server", f"output.dir={tmp_path / 'r'}"])
    assert result.exit_code == 2 and "needs the generation in the training process" in result.stderr
    assert not (tmp_path / "r").exists()


def test_the_watch_stops_a_row_once_its_program_is_whole(demo_model_dir: Path) -> None:
    """Fed token by token, each row stops at the first token after which its program is
    whole, and that program is the one the full text gives: the block that defines the entry
    point (not an imports block before it). Unfenced code, a block still open, or a row that
    ended are not stopped. Without stop_after_code nothing stops."""
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    from grpo_code.tasks.extract import build_program, whole_program

    tok = AutoTokenizer.from_pretrained(demo_model_dir)
    task = load_suite("demo").split("train").tasks[0]
    name = task.entry_point
    body = f"def {name}(*args):\n    return None\n"
    texts = [
        f"Here it is:\n```python\n{body}```\nIt returns None. More prose follows here.",
        f"```python\nimport math\n```\nThen:\n```python\n{body}```\nDone, and more text after.",
        f"{body}\nprint({name}(1))\nThat calls it once and prints the result.",
        f"```python\n{body}\n    # still writing the function body, never closed",
    ]
    rows = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    rows.append(tok("```python\nx = 1\n```", add_special_tokens=False)["input_ids"] + [tok.eos_token_id])

    from grpo_code.generation.stream import END, WHOLE, Sample, TokenKinds, Watch, text_watch
    from grpo_code.training.rollouts import PromptIndex, Rollouts

    submitted, speculated = [], []
    early = SimpleNamespace(speculate=lambda task_id, text: speculated.append(task_id))
    verifier = Verifier({task.id: task}, None)
    task_ids = [task.id] * len(rows)

    def watch_for(overlap: bool, stop_after_code: bool) -> Watch:
        rollouts = Rollouts(PromptIndex([]), verifier, "chat", None, early if overlap else None, stop_after_code)
        return rollouts.watch(tok, task_ids, lambda row, sample: submitted.append(row))

    def feed(watch: Watch) -> list[int | None]:
        """Each row token by token, as a backend streams it (an end token ends it)."""
        stopped_at: list[int | None] = [None] * len(rows)
        for row, ids in enumerate(rows):
            for k, token in enumerate(ids):
                if token == tok.eos_token_id:
                    watch.finish(row, Sample(ids[:k + 1], END))
                    break
                if watch.see(row, token, lambda k=k, ids=ids: ids[:k + 1]):
                    stopped_at[row] = k + 1
                    watch.finish(row, Sample(ids[:k + 1], WHOLE))
                    break
        return stopped_at

    stopped_at = feed(watch_for(overlap=True, stop_after_code=True))
    assert stopped_at[2:] == [None, None, None]
    for row in range(2):
        at = stopped_at[row]
        assert at is not None
        assert [whole_program(task, tok.decode(rows[row][:k])) for k in range(1, at + 1)] == [False] * (at - 1) + [True]
        assert build_program(task, tok.decode(rows[row][:at])).program == build_program(task, texts[row]).program
    assert sorted(submitted) == [0, 1, 4]  # stopped rows and the one that ended are reported

    submitted.clear()
    assert feed(watch_for(overlap=True, stop_after_code=False)) == [None] * len(rows)
    assert submitted == [4] and speculated  # overlap alone: the ended row, and programs started early

    # Eval's --stop-after-code stops the same rows at the same tokens (one watch).
    def done(i: int, text: str) -> bool:
        return whole_program(task, text, "chat", "last")

    assert feed(text_watch(tok, TokenKinds(tok), done, 1)) == stopped_at


def test_length_chunks_groups_rows_of_like_length_and_pays_for_each_call() -> None:
    from grpo_code.training.packing import length_chunks

    # Twenty short rows and one long one: the long row goes alone, the short ones together.
    prompts, completions = [100] * 21, [30] * 20 + [128]
    groups = length_chunks(prompts, completions)
    assert sorted(map(sorted, groups)) == [list(range(20)), [20]]
    # Rows of one length are never split: a second call would only add its cost.
    assert length_chunks([50] * 8, [40] * 8) == [list(range(8))]
    # max_rows bounds a group; every row is in exactly one group.
    groups = length_chunks(list(range(10, 40)), [5] * 30, max_rows=7)
    assert max(map(len, groups)) <= 7 and sorted(r for g in groups for r in g) == list(range(30))
    assert length_chunks([], []) == []
    # max_tokens bounds a group's padded tokens; a row wider than the bound goes alone.
    groups = length_chunks([100] * 8, [20] * 7 + [600], max_tokens=512)
    widths = [len(g) * (100 + max(20 if r < 7 else 600 for r in g)) for g in groups]
    assert [7] in groups and all(w <= 512 for g, w in zip(groups, widths) if g != [7])
    assert sorted(r for g in groups for r in g) == list(range(8))


def test_trimmed_forward_gives_the_padded_batch_log_probs_and_gradients(tiny_model_dir: Path, monkeypatch) -> None:
    """The grouped, cut forward pass returns TRL's log-probs and entropies for every row, in
    the batch's order, and the same gradient, from a fraction of the padded tokens; on a CPU
    no call takes more than ``CPU_TOKENS_PER_CALL`` tokens, cut or not."""
    import torch
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM
    from trl import GRPOTrainer
    from trl.trainer import add_fused_lm_head

    from grpo_code.training.packing import CPU_TOKENS_PER_CALL
    from grpo_code.training.trainer import GrpoCodeTrainer

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    add_fused_lm_head(model, temperature=0.8, outputs=("log_probs", "entropy"))
    trainer = object.__new__(GrpoCodeTrainer)
    trainer.accelerator = Accelerator(cpu=True)
    rows, prompt_width, keep = 12, 40, 32
    prompt_len = torch.tensor([40, 40, 40, 40, 12, 12, 12, 12, 25, 25, 25, 25])
    completion_len = torch.tensor([32, 5, 6, 7, 3, 4, 5, 6, 1, 9, 8, 0])  # one empty completion
    mask = torch.zeros(rows, prompt_width + keep, dtype=torch.long)
    for i in range(rows):
        mask[i, prompt_width - prompt_len[i]:prompt_width + completion_len[i]] = 1
    ids = torch.randint(1, model.config.vocab_size, mask.shape) * mask
    completion_mask = mask[:, prompt_width:].float()
    trl_forward = GRPOTrainer._get_per_token_logps_and_entropies
    calls: list[int] = []

    def recorded(self, model, input_ids, *args, batch_size=None, **kwargs):
        rows_a_call = batch_size or input_ids.size(0)
        calls.extend(min(rows_a_call, input_ids.size(0) - start) * input_ids.size(1)
                     for start in range(0, input_ids.size(0), rows_a_call))
        return trl_forward(self, model, input_ids, *args, batch_size=batch_size, **kwargs)

    def forward(trim: bool | None, batch_size: int | None = None) -> tuple[torch.Tensor, ...]:
        trainer.trim_padding = bool(trim)
        model.zero_grad()
        run = trl_forward.__get__(trainer) if trim is None else trainer._get_per_token_logps_and_entropies
        logps, entropy, _ = run(model, ids, mask, keep, batch_size=batch_size, compute_entropy=True)
        (logps * completion_mask).sum().backward()
        grad = model.model.layers[0].mlp.up_proj.weight.grad.clone()
        return logps * completion_mask, entropy * completion_mask, grad

    reference = forward(None)  # TRL's own: the whole padded batch in one call
    assert ids.numel() > CPU_TOKENS_PER_CALL
    monkeypatch.setattr(GRPOTrainer, "_get_per_token_logps_and_entropies", recorded)
    for trim, batch_size in ((False, None), (True, None), (True, 3)):
        calls.clear()
        ours = forward(trim, batch_size)
        assert calls and max(calls) <= CPU_TOKENS_PER_CALL, (trim, calls)
        if trim:
            assert sum(calls) < ids.numel()  # padding cut
        assert ours[0].shape == reference[0].shape
        assert torch.allclose(ours[0], reference[0], atol=1e-4)
        assert torch.allclose(ours[1], reference[1], atol=1e-4)
        assert torch.allclose(ours[2], reference[2], rtol=1e-3, atol=1e-6)
    assert reference[0].abs().sum() > 0


def test_train_cli_rejects_openai_generation(tmp_path: Path) -> None:
    result = runner.invoke(app, ["train", "generation.backend=openai", "generation.server_url=http://127.0.0.1:1/v1",
                                 f"output.dir={tmp_path / 'r'}"])
    assert result.exit_code == 2 and "cannot generate through the openai backend" in result.stderr


TINY = ["generation.backend=hf", "train.trl.max_steps=2", "train.trl.per_device_train_batch_size=8", "train.trl.num_generations=4",
        "train.trl.save_steps=1", "train.trl.learning_rate=1e-4", "generation.max_new_tokens=48",
        "generation.temperature=1.0", f"tasks.train_split={tiny_model.SPLIT}", "train.seed=1",
        "rewards.overlap=true", "train.stop_after_code=true", "sandbox.backend=docker", "sandbox.workers=2"]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def check_rewards_match_verdicts(completions: list[dict]) -> None:
    """Each logged reward follows from its verdicts (pass_fraction, no_code 0, compile_error 0),
    and the taught replies got the verdicts they deserve from the real sandbox."""
    tasks = {t.id: t for t in load_suite("demo").split(tiny_model.SPLIT).tasks}
    for c in completions:
        verdicts = c["verdicts"]
        if c["program"] is None:
            assert c["status"] == "no_code" and not verdicts and c["reward"] == 0.0, c
        elif "compile_error" in verdicts:
            assert c["reward"] == 0.0, c
        else:
            assert verdicts and c["reward"] == pytest.approx(verdicts.count("pass") / len(verdicts)), c
        right, _, broken, prose = tiny_model.replies(tasks[c["task_id"]])
        if c["completion"] == right:
            assert set(verdicts) == {"pass"} and c["reward"] == 1.0, c
        elif c["completion"] == broken:
            assert set(verdicts) == {"compile_error"}, c
        elif c["completion"] == prose:
            assert c["program"] is None, c
    assert any(c["reward"] == 1.0 for c in completions) and any(c["reward"] == 0.0 for c in completions)


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Torch on one thread: for 64-wide matrices, handing work to a second thread costs more
    than it saves (3x slower steps on 2 busy cores)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.docker
def test_a_bug_in_host_side_scoring_fails_the_step_with_its_error(
        tiny_model_dir: Path, docker_ready: None, one_thread: None, tmp_path: Path, monkeypatch) -> None:
    """Not a masked reward: a job whose future raises (a bug of ours, not the sandbox's)
    stops training with that error, and no step is logged as if it had been scored."""
    from concurrent.futures import Future

    from grpo_code.sandbox.api import Sandbox

    def broken(self, job):
        fut: Future = Future()
        fut.set_exception(ZeroDivisionError("host-side scoring broke"))
        return fut

    monkeypatch.setattr(Sandbox, "submit", broken)
    run = tmp_path / "run"
    result = runner.invoke(app, ["train", *TINY, "train.trl.max_steps=1", f"model.name={tiny_model_dir}",
                                 f"output.dir={run}"])
    assert result.exit_code != 0
    assert "unexpected ZeroDivisionError: host-side scoring broke" in result.stderr, result.output[-2000:]
    metrics = read_jsonl(run / "metrics.jsonl") if (run / "metrics.jsonl").exists() else []
    assert not [m for m in metrics if "reward" in m]


@pytest.mark.docker
def test_grpo_run_on_a_tiny_model_learns_from_the_sandbox_and_resumes(
        tiny_model_dir: Path, docker_ready: None, one_thread: None, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    run = tmp_path / "run"
    # The prompt filter on: its state is saved in each checkpoint and restored on resume.
    tiny = [*TINY, f"model.name={tiny_model_dir}", "train.filter.enabled=true", "train.filter.history=1"]
    result = runner.invoke(app, ["train", *tiny, f"output.dir={run}"])
    assert result.exit_code == 0, result.output
    assert "model saved to" in result.stdout and "grpo-code eval" in result.stdout
    # Output that is not a terminal gets one line per step, and the summary says what 2 steps can't show.
    assert re.findall(r"^step (\d)/2  reward \d\.\d{3}  pass \d\.\d{3}  [\d.]+ s$", result.stdout, re.M) == ["1", "2"]
    assert "too few steps to tell a change from noise" in result.stdout
    assert "scripts/learning_check.py" in result.stdout
    assert load_config(run / "config.yaml").model.name == str(tiny_model_dir)

    steps = [m for m in read_jsonl(run / "metrics.jsonl") if "reward" in m]
    assert [m["step"] for m in steps] == [1, 2]
    for key in ("timing/generate_s", "timing/reward_wait_s", "timing/sandbox_busy_s", "timing/step_s",
                "tests/pass_rate", "sandbox/cache_hit_rate", "sandbox/speculative_jobs", "reward_std",
                "memory/rss_gib", "memory/peak_rss_gib"):
        assert all(key in m for m in steps), key
    assert any(m["reward_std"] > 0 for m in steps), "the taught reply mix must give reward variance"
    # stop_after_code: rows end at their closing fence, before the end token they were taught,
    # and (overlap) go to the sandbox while the rest of the batch is still generating.
    assert sum(m["completions/stopped_after_code"] for m in steps) > 0
    # A stopped completion is what was sampled, without the padding generate added after it
    # (SmolLM2 pads with its end token): TRL sees no end token and counts it as clipped.
    assert all(m["completions/clipped_ratio"] >= m["completions/stopped_after_code"] for m in steps)
    assert all(m["sandbox/early_jobs"] >= m["completions/stopped_after_code"] * 8 for m in steps)

    completions = read_jsonl(run / "completions.jsonl")
    assert len(completions) == 16 and [c["step"] for c in completions] == [0] * 8 + [1] * 8
    check_rewards_match_verdicts(completions)
    for m, first in zip(steps, (0, 8)):  # a step's logged reward is the mean of its samples'
        assert m["reward"] == pytest.approx(sum(c["reward"] for c in completions[first:first + 8]) / 8, abs=1e-6)

    before = load_file(tiny_model_dir / "model.safetensors")
    after = load_file(run / "final" / "model.safetensors")
    assert before.keys() == after.keys()
    assert [k for k in after if not before[k].equal(after[k])], "the GRPO update changed no parameter"
    assert (run / "checkpoint-1" / "trainer_state.json").is_file()
    assert (run / "checkpoint-2" / "trainer_state.json").is_file()
    saved = json.loads((run / "checkpoint-1" / "prompt_filter.json").read_text())
    assert saved["sampler"]["drawn"] and set(saved["filter"]["zero"]) <= {c["task_id"] for c in completions[:8]}

    # A run killed after its first checkpoint: --resume (no config: the run's own) trains step 2 only.
    shutil.rmtree(run / "checkpoint-2")
    shutil.rmtree(run / "final")
    again = runner.invoke(app, ["train", "--resume", str(run)])
    assert again.exit_code == 0, again.output
    state = json.loads((run / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["global_step"] == 2 and [h["step"] for h in state["log_history"] if "reward" in h] == [1, 2]
    assert [m["step"] for m in read_jsonl(run / "metrics.jsonl") if "reward" in m] == [1, 2, 2]
    # The checkpoint restored weights, optimizer, data order and RNG: step 2 is redone exactly.
    resumed = read_jsonl(run / "completions.jsonl")[16:]
    assert [c["step"] for c in resumed] == [1] * 8
    assert [(c["task_id"], c["completion"]) for c in resumed] == [(c["task_id"], c["completion"]) for c in completions[8:]]
    again_final = load_file(run / "final" / "model.safetensors")
    assert all(again_final[k].equal(after[k]) for k in after)

    refused = runner.invoke(app, ["train", *tiny, "train.trl.learning_rate=1e-3", f"output.dir={run}",
                                  "--resume", str(run)])
    assert refused.exit_code == 2 and "train.trl.learning_rate" in refused.stderr


@pytest.mark.docker
def test_held_out_eval_during_training_logs_pass_at_1_at_each_due_version(
        tiny_model_dir: Path, docker_ready: None, one_thread: None, tmp_path: Path) -> None:
    """``train.eval_every=1`` on 2 steps: the held-out tasks are sampled with the weights of
    version 1 (in step 2's generation call) and, after the last step, of version 2; each
    version's line has its pass@1 and version, the summary prints the curve, and the
    training rows are what they are without it."""
    run = tmp_path / "run"
    tiny = [*TINY, f"model.name={tiny_model_dir}", "train.eval_every=1", "tasks.eval_split=2-3", "train.eval_n=2"]
    result = runner.invoke(app, ["train", *tiny, f"output.dir={run}"])
    assert result.exit_code == 0, result.output
    rows = read_jsonl(run / "metrics.jsonl")
    held = [r for r in rows if "eval/pass@1" in r]
    assert [(r["step"], r["eval/policy_version"]) for r in held] == [(1, 1), (2, 2)]
    assert all(r["eval/tasks"] == 2 and r["eval/samples"] + r["eval/masked"] == 4 for r in held)
    assert all(0.0 <= r["eval/pass@1"] <= 1.0 for r in held)
    assert "held-out pass@1 by policy version: v1 " in result.stdout and ", v2 " in result.stdout
    assert "held-out eval every 1 updates: 2 tasks of split 2-3, 2 sample(s) each" in result.output
    completions = read_jsonl(run / "completions.jsonl")
    assert len(completions) == 16  # the held-out rows are not training rows


@pytest.mark.docker
def test_a_multi_turn_run_logs_conversations_and_resumes_bit_for_bit(
        tiny_model_dir: Path, docker_ready: None, one_thread: None, tmp_path: Path) -> None:
    run = tmp_path / "run"
    tiny = [*TINY, f"model.name={tiny_model_dir}", "train.multi_turn.turns=2", "rewards.overlap=false"]
    result = runner.invoke(app, ["train", *tiny, f"output.dir={run}"])
    assert result.exit_code == 0, result.output
    steps = [m for m in read_jsonl(run / "metrics.jsonl") if "reward" in m]
    for key in ("multi_turn/second_turn_frac", "multi_turn/turns_mean", "multi_turn/rows_turn1", "timing/turn1_s",
                "multi_turn/public_pass_turn1"):
        assert all(key in m for m in steps), key
    completions = read_jsonl(run / "completions.jsonl")
    assert len(completions) == 16
    assert all(c["conversation"][-1]["content"] == c["completion"] for c in completions)
    assert all(len(c["conversation"]) == 2 * c["turns"] - 1 for c in completions)
    # The taught wrong and broken replies fail their public test: they get a second turn.
    assert any(c["turns"] == 2 for c in completions)
    shutil.rmtree(run / "checkpoint-2")
    shutil.rmtree(run / "final")
    again = runner.invoke(app, ["train", "--resume", str(run)])
    assert again.exit_code == 0, again.output
    resumed = read_jsonl(run / "completions.jsonl")[16:]
    assert [(c["task_id"], c["conversation"], c["reward"]) for c in resumed] == [
        (c["task_id"], c["conversation"], c["reward"]) for c in completions[8:]]


def test_a_masked_row_keeps_its_reason_in_the_completions_log() -> None:
    from grpo_code.rewards.functions import Scored
    from grpo_code.sandbox.types import Result
    from grpo_code.training.rollout_log import completion_record as _completion_record
    from grpo_code.verify.runs import Source
    from grpo_code.verify.verifier import Judged

    lost = Judged("t/1", Result.infra_error(2, "worker-1: the executor went away"), Source.EXECUTED, "fenced", "x = 1")
    record = _completion_record("t/1", "```python\nx = 1\n```", Scored(lost, None))
    assert record["status"] == "infra_error" and record["masked_because"] == "worker-1: the executor went away"
    cut = _completion_record("t/1", "```python\nx =", Scored(Judged("t/1", None, Source.UNFINISHED, "fenced", "x ="), 0.0))
    assert cut["status"] == "unfinished" and "masked_because" not in cut


def test_a_colocated_engine_is_sized_for_its_generation_batch() -> None:
    """The engine's context: the longest prompt and completion (the model's limit in
    multi-turn, ``vllm_max_model_length`` when set); its KV cache: one such sequence or a
    whole generation batch, whichever is more, in the engine's dtype."""
    from types import SimpleNamespace

    from grpo_code.generation.vllm import KV_SPARE_TOKENS, kv_cache_bytes
    from grpo_code.training.colocated import engine_size

    config = SimpleNamespace(num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, hidden_size=576,
                             max_position_embeddings=8192, dtype="torch.bfloat16")
    per_token = 2 * 30 * 3 * 64 * 2  # keys and values, 30 layers, 3 heads of 64, bf16
    mib = 1 << 20
    assert kv_cache_bytes(config, "auto", 1000) == -(-per_token * (1000 + KV_SPARE_TOKENS) // mib) * mib
    assert kv_cache_bytes(config, "float32", 1000) == -(-2 * per_token * (1000 + KV_SPARE_TOKENS) // mib) * mib
    model = SimpleNamespace(config=config)
    args = SimpleNamespace(max_completion_length=128, per_device_train_batch_size=4, steps_per_generation=2,
                           vllm_max_model_length=None)
    size = engine_size(model, 200, args, "auto")
    assert size.max_model_len == 200 + 128 + 16
    assert size.kv_bytes == kv_cache_bytes(config, "auto", 8 * 344)  # 4 rows x 2 steps per generation
    turns = engine_size(model, 200, args, "auto", multi_turn=True)
    assert turns.max_model_len == 8192 and turns.kv_bytes == kv_cache_bytes(config, "auto", 8192)
    args.vllm_max_model_length = 1024
    assert engine_size(model, 200, args, "auto").max_model_len == 1024
