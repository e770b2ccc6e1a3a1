"""The report: detection of runs and evals, summary numbers, PNGs and the self-contained HTML page.

Inputs are small directories recorded from real runs and evals (tests/data/report/README.md).
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grpo_code.cli import app
from grpo_code.errors import MissingFileError
from grpo_code.report import ReportError, build_report
from grpo_code.report.load import RunData, load_dirs, run_summary

DATA = Path(__file__).parent / "data" / "report"
RUN = DATA / "run-demo"  # 12 CPU demo steps, prompt filter off
RUN_FILTER = DATA / "run-filter"  # 8 steps on 4 tasks with the prompt filter on
EVAL_TEST = DATA / "eval-smollm2-test"  # `grpo-code eval` out dir: <model>/summary.json
EVAL_TRAIN = DATA / "eval-smollm2-train"
EVAL_REF = DATA / "eval-reference-test"  # `grpo-code eval --samples` of the reference solutions
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
runner = CliRunner()


def assert_png(path: Path) -> None:
    from matplotlib.image import imread

    assert path.read_bytes()[:8] == PNG_SIGNATURE, path
    pixels = imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 200 and pixels.shape[1] > 400, (path, pixels.shape)
    assert pixels.std() > 0.01, f"{path} is blank"


def embedded_images(page: str) -> dict[str, bytes]:
    """figure id -> decoded PNG bytes of every <img> in the page."""
    found = re.findall(r"<figure id='([\w-]+)'>.*?<img src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page, re.S)
    return {fig: base64.b64decode(data) for fig, data in found}


def test_report_of_runs_and_evals_writes_valid_pngs_embedded_in_one_html_page(tmp_path: Path) -> None:
    out = tmp_path / "report"
    report = build_report([RUN, RUN_FILTER, EVAL_TEST, EVAL_REF], out)
    expected = {"train_reward.png", "train_pass_rate.png", "train_verdicts.png", "train_length.png",
                "train_timing.png", "train_filter.png", "eval_pass_at_k.png", "eval_tasks.png", "eval_verdicts.png"}
    assert {f.file for f in report.figures} == expected
    # Single-turn runs and evals: the multi-turn figures are notes, not plots.
    assert [(s, t) for s, t, _ in report.skipped] == [("runs", "Held-out pass@1 during training"),
                                                      ("runs", "Multi-turn rollouts"), ("evals", "pass@1 by turn")]
    for name in expected:
        assert_png(out / name)
    page = report.html.read_text()
    images = embedded_images(page)
    assert set(images) == {name[:-4] for name in expected}
    for fig, data in images.items():
        assert data == (out / f"{fig}.png").read_bytes()
    # Self-contained: nothing is fetched from elsewhere.
    assert not re.search(r"""(src|href)=['"](?!data:)""", page)
    assert "<link" not in page and "<script" not in page
    for name in ("run-demo", "run-filter", "smollm2-135m-instruct", "eval-reference-test"):
        assert name in page


def test_missing_metrics_skip_their_plot_with_a_note(tmp_path: Path) -> None:
    report = build_report([RUN], tmp_path / "r")
    assert [(s, t) for s, t, _ in report.skipped] == [("runs", "Held-out pass@1 during training"),
                                                      ("runs", "Prompt-filter savings"), ("runs", "Multi-turn rollouts")]
    assert "train.eval_every" in report.skipped[0][2]
    assert "train.filter.enabled: false" in report.skipped[1][2]
    assert not (tmp_path / "r" / "train_filter.png").exists()
    assert "Prompt-filter savings: prompt filter off" in report.html.read_text()

    # A run that logged only the reward: one plot, notes for the rest, no crash.
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(RUN / "config.yaml", bare)
    rows = [json.loads(line) for line in (RUN / "metrics.jsonl").read_text().splitlines()]
    (bare / "metrics.jsonl").write_text("".join(
        json.dumps({"step": r["step"], "reward": r["reward"]}) + "\n" for r in rows if "reward" in r))
    report = build_report([bare], tmp_path / "bare-report")
    assert [f.file for f in report.figures] == ["train_reward.png"]
    assert len(report.skipped) == 7 and all(why for _, _, why in report.skipped)
    assert_png(tmp_path / "bare-report" / "train_reward.png")


def test_multi_turn_runs_and_evals_get_their_per_turn_figures(tmp_path: Path) -> None:
    run, ev = tmp_path / "run-mt", tmp_path / "eval-mt"
    run.mkdir()
    shutil.copy(RUN / "config.yaml", run)
    rows = [json.loads(line) for line in (RUN / "metrics.jsonl").read_text().splitlines()]
    (run / "metrics.jsonl").write_text("".join(json.dumps(
        {**r, "multi_turn/public_pass_turn1": 0.25, "multi_turn/second_turn_frac": 0.75}) + "\n" for r in rows))
    shutil.copytree(EVAL_TEST, ev)
    summary_path = next(ev.glob("*/summary.json"))
    summary = json.loads(summary_path.read_text())
    summary["turns"] = {"max": 2, "pass_at_1": [0.2, 0.3], "mean_turns": 1.6, "samples_per_turn": [10, 6],
                        "verdicts": [{"fail": 8, "pass": 2}, {"fail": 5, "pass": 1}]}
    summary_path.write_text(json.dumps(summary))
    report = build_report([run, ev], tmp_path / "r")
    assert {"train_turns.png", "eval_turns.png"} <= {f.file for f in report.figures}
    assert_png(tmp_path / "r" / "train_turns.png")
    assert_png(tmp_path / "r" / "eval_turns.png")


def test_held_out_eval_lines_are_plotted_beside_the_reward_and_kept_by_step(tmp_path: Path) -> None:
    """``train.eval_every`` writes a line of its own per policy version (step = version):
    the reader merges it into that step, the summary reads the curve and the report plots it."""
    from grpo_code import metric_names as M
    from grpo_code.report.load import read_metrics, step_values

    run = tmp_path / "run-eval"
    run.mkdir()
    shutil.copy(RUN / "config.yaml", run)
    lines = (RUN / "metrics.jsonl").read_text().splitlines()
    held = [json.dumps({"step": v, M.EVAL_PASS1: p, M.EVAL_VERSION: v}) for v, p in ((4, 0.1), (8, 0.2), (12, 0.25))]
    (run / "metrics.jsonl").write_text("\n".join(lines + held) + "\n")
    rows = read_metrics(run / "metrics.jsonl")
    assert step_values(rows, M.EVAL_PASS1) == [(4, 0.1), (8, 0.2), (12, 0.25)]
    assert [r["step"] for r in rows] == list(range(1, 13)) and all("reward" in r for r in rows)
    report = build_report([run], tmp_path / "r")
    assert "train_held_out.png" in {f.file for f in report.figures}
    assert_png(tmp_path / "r" / "train_held_out.png")


def test_run_summary_numbers_match_the_metrics_file() -> None:
    rows = [json.loads(line) for line in (RUN / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "reward" in r]
    (run,) = load_dirs([RUN])
    s = run_summary(run)
    q = len(steps) // 4
    assert s["steps"] == len(steps) == 12
    assert s["reward_first"] == pytest.approx(sum(r["reward"] for r in steps[:q]) / q)
    assert s["reward_last"] == pytest.approx(sum(r["reward"] for r in steps[-q:]) / q)
    assert s["pass_last"] == pytest.approx(sum(r["tests/pass_rate"] for r in steps[-q:]) / q)
    wait = sum(r["timing/reward_wait_s"] for r in steps)
    assert s["wait_share"] == pytest.approx(wait / sum(r["timing/step_s"] for r in steps))
    assert s["wait_of_busy"] == pytest.approx(wait / sum(r["timing/sandbox_busy_s"] for r in steps))


def test_resumed_run_keeps_the_last_line_of_a_step_and_ignores_a_torn_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(RUN / "config.yaml", run)
    lines = [json.dumps({"step": s, "reward": 0.1 * s}) for s in (1, 2, 3)]
    lines += [json.dumps({"step": 3, "reward": 0.9}), json.dumps({"step": 4, "reward": 1.0})]
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n" + '{"step": 5, "rew')
    (item,) = load_dirs([run])
    assert item.series("reward") == ([1.0, 2.0, 3.0, 4.0], [pytest.approx(0.1), pytest.approx(0.2), 0.9, 1.0])


def test_eval_dirs_of_both_layouts_are_found_and_named_uniquely() -> None:
    items = load_dirs([EVAL_TEST, EVAL_TRAIN, EVAL_REF])
    assert [i.name for i in items] == ["eval-smollm2-test/smollm2-135m-instruct",
                                       "eval-smollm2-train/smollm2-135m-instruct", "eval-reference-test"]
    assert items[2].pass_at(1) == (1.0, 1.0, 1.0)


def test_tasks_missing_from_an_eval_are_grey_cells_not_errors(tmp_path: Path) -> None:
    report = build_report([EVAL_TEST, EVAL_TRAIN], tmp_path / "r")
    assert {f.file for f in report.figures} == {"eval_pass_at_k.png", "eval_tasks.png", "eval_verdicts.png"}
    assert_png(tmp_path / "r" / "eval_tasks.png")


def test_cli_report_writes_next_to_the_first_dir_and_prints_the_tables(tmp_path: Path) -> None:
    run = tmp_path / "run-demo"
    shutil.copytree(RUN, run)
    result = runner.invoke(app, ["report", str(run), str(EVAL_TEST)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert (run / "report" / "report.html").is_file()
    assert "run-demo" in result.stdout and "smollm2-135m-instruct" in result.stdout
    assert "0.139" in result.stdout  # pass@1 of the recorded eval
    assert "not plotted: Prompt-filter savings" in result.stdout
    assert f"report: {run / 'report' / 'report.html'}" in result.stdout


def test_cli_report_refuses_a_dir_that_is_neither_run_nor_eval(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {tmp_path} is neither a training run nor an eval")
    assert "config.yaml + metrics.jsonl" in lines[0] and "summary.json" in lines[0]
    result = runner.invoke(app, ["report", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "nope not found" in result.stderr


def test_library_errors_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(MissingFileError):
        build_report([tmp_path / "nope"])
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "summary.json").write_text("{not json")
    with pytest.raises(ReportError, match="cannot be read"):
        build_report([bad])
    (tmp_path / "file").write_text("")
    with pytest.raises(ReportError, match="is a file"):
        build_report([RUN], tmp_path / "file")


def test_report_without_matplotlib_says_which_extra_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # matplotlib is the `report` extra, not a dependency of `pip install grpo-code`.
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    result = runner.invoke(app, ["report", str(RUN), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: grpo-code report draws its plots with matplotlib, which is not installed "
        "(pip install 'grpo-code[report]')"]
    assert not (tmp_path / "out").exists()


def _verdict_run(rows: list[dict]) -> RunData:
    return RunData(name="r", path=Path("r"), rows=rows)


def test_tests_that_never_ran_are_not_drawn_as_passes() -> None:
    from grpo_code.report.plots import _verdict_shares

    # A stop_on_failure step: 1 test of 10 passed, 1 failed, 8 never ran; a step whose value was too big.
    new = {"step": 1, "tests/pass": 0.1, "tests/fail": 0.1, "tests/not_run": 0.8, "tests/output_limit": 0.0}
    too_big = {"step": 2, "tests/pass": 0.5, "tests/output_limit": 0.5, "tests/fail": 0.0}
    # A run logged before tests/pass was written: pass is what every other verdict leaves.
    old = {"step": 3, "tests/fail": 0.1, "tests/not_run": 0.8, "tests/timeout": 0.0}
    steps, shares = _verdict_shares(_verdict_run([new, too_big, old]))
    assert steps == [1.0, 2.0, 3.0]
    assert shares["pass"] == pytest.approx([0.1, 0.5, 0.1])
    assert shares["not_run"] == pytest.approx([0.8, 0.0, 0.8])
    assert shares["output_limit"] == pytest.approx([0.0, 0.5, 0.0])


def test_batch_metrics_log_every_verdict_pass_included() -> None:
    from types import SimpleNamespace

    from grpo_code.rewards.metrics import batch_metrics
    from grpo_code.sandbox.results import Verdict
    from grpo_code.verify.runs import Source

    tests = [SimpleNamespace(verdict=v, attested=True) for v in (Verdict.PASS, Verdict.FAIL, Verdict.NOT_RUN, Verdict.NOT_RUN)]
    result = SimpleNamespace(status=SimpleNamespace(), tests=tests, duration_ms=5.0)
    scored = [SimpleNamespace(source=Source.EXECUTED, result=result, reward=0.25)]
    m = batch_metrics(scored)
    shares = {v.value: m[f"tests/{v.value}"] for v in Verdict}
    assert shares["pass"] == 0.25 and shares["fail"] == 0.25 and shares["not_run"] == 0.5
    assert sum(shares.values()) == pytest.approx(1.0)
