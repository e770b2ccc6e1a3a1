"""Config loading: YAML + dotted overrides, typed by the dataclasses, all problems at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REPO
from grpo_code.config import RunConfig, check_trl_keys, load_config, parse_overrides
from grpo_code.errors import ConfigError, MissingFileError

CONFIGS = sorted((REPO / "configs").glob("*.yaml"))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_bundled_config_loads_and_validates(path: Path) -> None:
    cfg = load_config(path)
    assert isinstance(cfg, RunConfig)
    assert check_trl_keys(cfg) == []


def test_there_are_bundled_configs() -> None:
    assert any(p.name == "demo.yaml" for p in CONFIGS)


def test_default_is_demo() -> None:
    assert load_config().name == "demo"


def test_overrides_are_typed_by_fields(tmp_path: Path) -> None:
    cfg = load_config(
        REPO / "configs" / "demo.yaml",
        ["sandbox.workers=3", "sandbox.timeout_s=2", "rewards.overlap=false", "eval.n=8", "eval.k=1,8",
         "model.name=1e3", "train.trl.learning_rate=1e-5", "train.trl.new.nested=x", "sandbox.image=null"],
    )
    assert cfg.sandbox.workers == 3
    assert cfg.sandbox.timeout_s == 2.0 and isinstance(cfg.sandbox.timeout_s, float)
    assert cfg.rewards.overlap is False
    assert cfg.eval.k == [1, 8]
    assert cfg.model.name == "1e3"  # a str field keeps the text as typed
    assert cfg.train.trl["learning_rate"] == pytest.approx(1e-5)
    assert cfg.train.trl["new"] == {"nested": "x"}
    assert cfg.train.trl["num_generations"] == 4  # untouched keys of the file survive
    assert cfg.sandbox.image is None


def test_unknown_key_is_named_with_a_suggestion(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, "sandbox:\n  worker: 2\n"))
    assert "sandbox.worker: unknown key (did you mean 'workers'?)" in str(info.value)


def test_all_problems_reported_at_once(tmp_path: Path) -> None:
    path = write(tmp_path, "sandbox:\n  workers: many\n  backend: cloud\n  nope: 1\ngeneration:\n  top_p: 2\nextra: 1\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, ["eval.n=zero"])
    problems = info.value.problems
    assert len(problems) == 6, problems
    text = str(info.value)
    for needle in ["sandbox.workers: 'many'", "sandbox.backend: 'cloud'", "'docker'", "sandbox.nope",
                   "generation.top_p: 2.0 is too large (must be <= 1.0)", "extra: unknown key", "eval.n: 'zero'"]:
        assert needle in text
    assert str(path) in text


def test_bounds_and_cross_checks(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"sandbox.workers: 0 is too small \(must be >= 1\)"):
        load_config(None, ["sandbox.workers=0"])
    with pytest.raises(ConfigError, match="eval.k"):
        load_config(None, ["eval.n=2", "eval.k=4,5"])


def test_k_above_n_is_one_rule_from_the_config_and_the_command_line() -> None:
    from grpo_code.evaluate import usable_ks

    # A k above n is skipped with a note wherever n comes from; only no k left is an error.
    cfg = load_config(None, ["eval.n=2", "eval.k=1,5"])
    notes: list[str] = []
    assert usable_ks(cfg.eval.k, cfg.eval.n, notes.append) == [1]
    assert notes == ["pass@5 skipped: pass@k needs k <= n, and n=2 samples per task"]
    with pytest.raises(ConfigError, match="generation.server_url"):
        load_config(None, ["generation.backend=openai"])
    with pytest.raises(ConfigError, match="sandbox.max_job_output_kb: 32 is under sandbox.max_output_kb=64"):
        load_config(None, ["sandbox.max_job_output_kb=32"])


def test_wrong_types(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, "rewards:\n  cache: 'yes'\ntrain:\n  trl: [1]\neval:\n  k: [1, x]\n"))
    text = str(info.value)
    assert "rewards.cache: 'yes' is invalid (expected bool)" in text
    assert "train.trl: [1] is invalid (expected a mapping)" in text
    assert "eval.k[1]: 'x' is invalid (expected int)" in text


def test_bad_override_syntax() -> None:
    _, _, problems = parse_overrides(["sandbox.workers", "=3", "a..b=1"])
    assert len(problems) == 3


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(MissingFileError):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="invalid YAML at line"):
        load_config(write(tmp_path, "a: [1\n"))
    with pytest.raises(ConfigError, match="expected a mapping of sections"):
        load_config(write(tmp_path, "- 1\n- 2\n"))


def test_unknown_trl_option_is_named() -> None:
    cfg = load_config(None, ["train.trl.learnin_rate=1e-5"])
    problems = check_trl_keys(cfg)
    assert problems == ["train.trl.learnin_rate: unknown GRPOConfig option (did you mean 'learning_rate'?)"]


def test_resolved_config_round_trips_through_yaml(tmp_path: Path) -> None:
    cfg = load_config(None, ["sandbox.workers=5", "train.trl.max_steps=7"])
    again = load_config(write(tmp_path, cfg.to_yaml()))
    assert again == cfg


def test_an_override_in_place_of_the_config_uses_the_default() -> None:
    cfg = load_config("sandbox.workers=2", ["eval.n=6"])
    assert cfg.name == "demo" and cfg.sandbox.workers == 2 and cfg.eval.n == 6


@pytest.mark.parametrize("path", sorted((REPO / "configs" / "accelerate").glob("*.yaml")), ids=lambda p: p.name)
def test_accelerate_configs_are_valid_yaml(path: Path) -> None:
    import yaml
    from accelerate.commands.config.config_args import ClusterConfig
    from accelerate.commands.launch import launch_command_parser

    data = yaml.safe_load(path.read_text())
    assert data["distributed_type"] in ("MULTI_GPU", "DEEPSPEED") and data["num_processes"] >= 2
    ClusterConfig.from_yaml_file(str(path))  # accelerate's own loader: unknown keys are errors
    # each deepspeed_config key must be a launcher option, or `accelerate launch` ignores it
    options = {action.dest for action in launch_command_parser()._actions}
    assert not set(data.get("deepspeed_config", {})) - options
    if data["distributed_type"] == "DEEPSPEED":
        assert data["deepspeed_config"]["zero_stage"] in (2, 3)


def test_config_validate_lists_every_problem_cross_field_ones_included(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from grpo_code.cli import app

    path = tmp_path / "three.yaml"
    path.write_text("sandbox:\n  workers: 0\ngeneration:\n  backend: openai\neval:\n  n: many\n")
    result = CliRunner().invoke(app, ["config", "validate", "--no-trl", str(path)])
    assert result.exit_code == 2
    for problem in ("sandbox.workers: 0 is too small", "eval.n: 'many' is invalid",
                    "generation.server_url: null but backend is openai"):  # the last one is cross-field
        assert problem in result.stderr, result.stderr


def test_a_cross_check_on_a_field_already_reported_is_not_said_twice() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, ["eval.n=zero", "eval.k=4,5"])
    assert "eval.n: 'zero' is invalid" in str(err.value) and "no k <= eval.n" not in str(err.value)


def test_one_key_per_sampling_setting() -> None:
    with pytest.raises(ConfigError, match=r"train.trl.temperature: said once, as generation.temperature"):
        load_config(None, ["train.trl.temperature=0.5"])
    with pytest.raises(ConfigError, match=r"eval.temperature: said once now, as generation.temperature"):
        load_config(None, ["eval.temperature=0.5"])
    assert load_config(None, ["generation.temperature=0.5"]).generation.temperature == 0.5


def test_a_dict_of_ints_can_be_set_from_the_command_line() -> None:
    cfg = load_config(None, ["rewards.judge.votes_schedule.0=1", "rewards.judge.votes_schedule.20=3"])
    assert cfg.rewards.judge.votes_schedule == {0: 1, 20: 3}
    with pytest.raises(ConfigError, match="votes_schedule.x"):
        load_config(None, ["rewards.judge.votes_schedule.x=1"])
