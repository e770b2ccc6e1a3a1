"""Rewards without Docker or models: reward modes, masking, blending, cache keys, the
verifier as training uses it (early jobs, in-flight sharing, the store across steps) and
the TRL reward function."""

from __future__ import annotations

import asyncio
import dataclasses
from concurrent.futures import Future
from pathlib import Path

import pytest

from grpo_code.config import RewardModelConfig, RewardsConfig, RewardTestsConfig, SandboxConfig, load_config
from grpo_code.errors import ConfigError, RewardError, SandboxError
from grpo_code.rewards import (
    Scored,
    blend,
    build_reward_funcs,
    check_masked,
    reward_of,
    reward_verifier,
    score_result,
    weights_for,
)
from grpo_code.rewards.blend import normalize_groups
from grpo_code.rewards.metrics import percentile
from grpo_code.rewards.model.remote import parse_scores
from grpo_code.sandbox import image
from grpo_code.sandbox.fingerprint import sandbox_fingerprint
from grpo_code.sandbox.types import CallTest, Job, Limits, Result, ScriptTest, Status, TestResult, Verdict
from grpo_code.tasks import Task
from grpo_code.tasks.prompts import completion_text
from grpo_code.verify.early import EarlyJobs
from grpo_code.verify.store import RewardCache, cache_key
from grpo_code.verify.verifier import UnknownTask

P, F, T, RE, CE = Verdict.PASS, Verdict.FAIL, Verdict.TIMEOUT, Verdict.RUNTIME_ERROR, Verdict.COMPILE_ERROR


def result(*verdicts: Verdict, duration_ms: float = 10.0) -> Result:
    tests = tuple(TestResult(v) for v in verdicts)
    passed = sum(v is P for v in verdicts)
    return Result(Status.PASS if passed == len(tests) else Status.FAIL, passed, len(tests), tests, duration_ms)


INFRA = Result.infra_error(3, "container died")


# --------------------------------------------------------------------------- verifiable reward


def test_pass_fraction_is_default_and_partial():
    cfg = RewardTestsConfig()
    assert cfg.mode == "pass_fraction"
    assert score_result(result(P, P, F, T), cfg) == 0.5
    assert score_result(result(P, P, P), cfg) == 1.0
    assert score_result(result(F, RE, T), cfg) == 0.0


def test_all_or_nothing():
    cfg = RewardTestsConfig(mode="all_or_nothing")
    assert score_result(result(P, P, F), cfg) == 0.0
    assert score_result(result(P, P, P), cfg) == 1.0


def test_weighted_mode_uses_task_metadata_weights():
    cfg = RewardTestsConfig(mode="weighted")
    task = Task("t", "p", (ScriptTest("pass"),) * 3, metadata={"test_weights": [1, 1, 2]})
    weights = weights_for(task, cfg)
    assert weights == (1.0, 1.0, 2.0)
    assert score_result(result(P, P, F), cfg, weights) == 0.5
    assert score_result(result(F, F, P), cfg, weights) == 0.5
    assert score_result(result(P, F, P), cfg, weights) == 0.75
    # no weights in the task: every test weighs 1 (= pass_fraction)
    plain = Task("u", "p", (ScriptTest("pass"),) * 3)
    assert weights_for(plain, cfg) is None
    assert score_result(result(P, F, F), cfg, None) == pytest.approx(1 / 3)
    # other modes ignore the weights
    assert weights_for(task, RewardTestsConfig()) is None


@pytest.mark.parametrize("bad", [[1, 2], [1, -1, 1], [0, 0, 0], "abc", [1, True, 1]])
def test_weighted_mode_rejects_bad_weights(bad):
    task = Task("t", "p", (ScriptTest("pass"),) * 3, metadata={"test_weights": bad})
    with pytest.raises(RewardError, match="test_weights"):
        weights_for(task, RewardTestsConfig(mode="weighted"))


def test_no_code_compile_error_and_infra_values():
    cfg = RewardTestsConfig(no_code=-0.5, compile_error=-0.25)
    assert score_result(None, cfg) == -0.5
    assert score_result(result(CE, CE, CE), cfg) == -0.25
    assert score_result(INFRA, cfg) is None
    assert score_result(INFRA, RewardTestsConfig(mode="all_or_nothing")) is None


def test_masking_rule_counts_and_raises_over_threshold():
    assert check_masked([1.0, None, 0.0, 0.5], 0.25) == 1
    with pytest.raises(RewardError) as info:
        check_masked([1.0, None, None, 0.5], 0.25, ["container died", "container died", "socket closed"])
    message = str(info.value)
    assert "2 of 4" in message and "max_masked_frac=0.25" in message
    assert "container died | socket closed" in message
    assert check_masked([None] * 4, 1.0) == 4
    with pytest.raises(RewardError):
        check_masked([None, 1.0], 0.0)


# --------------------------------------------------------------------------- blending


def test_group_normalisation_bounds_model_influence():
    raw = [1000.0, -1000.0, 0.0, 5.0, 5.0, None]
    norm = normalize_groups(raw, [[0, 1, 2], [3, 4, 5]])
    assert norm[:3] == [0.5, -0.5, 0.0]
    assert norm[3:] == [0.0, 0.0, None]
    tests = [0.0, 0.0, 0.0, 1.0, 0.5, 1.0]
    out = blend(tests, raw, ["a", "a", "a", "b", "b", "b"], weight=0.2, mode="sum")
    assert out == pytest.approx([0.1, -0.1, 0.0, 1.0, 0.5, 1.0])
    assert all(abs(o - t) <= 0.1 + 1e-12 for o, t in zip(out, tests))


def test_sum_without_normalisation_uses_raw_scale():
    out = blend([0.5, 0.5], [10.0, -10.0], ["a", "a"], weight=0.1, normalize="none")
    assert out == pytest.approx([1.5, -0.5])


def test_blend_keeps_masked_and_tolerates_missing_model_scores():
    out = blend([None, 0.5, 1.0], [3.0, None, 1.0], ["a", "a", "a"], weight=1.0)
    assert out[0] is None
    assert out[1] == 0.5  # no model score: the test reward stands
    assert out[2] == 1.0  # alone in its group with a score: centred to 0


def test_gate_only_breaks_ties():
    tests = [1.0, 1.0, 0.5, 0.5, 0.0, None]
    model = [-5.0, 5.0, 100.0, -100.0, 7.0, 9.0]
    out = blend(tests, model, ["g"] * 6, weight=10.0, mode="gate")
    assert out[5] is None
    assert out[1] > out[0] and out[2] > out[3]  # ties ranked by the model
    assert min(out[0], out[1]) > max(out[2], out[3]) > out[4]  # test order never crosses
    assert out[4] == 0.0  # a lone completion at its level gets no bonus
    # a small weight caps the bonus below the gap
    small = blend(tests[:4], model[:4], ["g"] * 4, weight=0.01, mode="gate")
    assert small == pytest.approx([0.995, 1.005, 0.505, 0.495])


def test_gate_groups_by_task():
    out = blend([1.0, 1.0, 1.0, 1.0], [1.0, 2.0, 2.0, 1.0], ["a", "a", "b", "b"], weight=0.1, mode="gate")
    assert out[1] > out[0] and out[2] > out[3]


# --------------------------------------------------------------------------- cache keys


SB = SandboxConfig()
JOB = Job("def f():\n    return 1\n", (CallTest("f", (), 1),), "python", Limits(timeout_s=2.0))


@pytest.mark.parametrize(
    "change",
    [
        lambda j, s, i: (dataclasses.replace(j, program=j.program + " "), s, i),
        lambda j, s, i: (dataclasses.replace(j, tests=(CallTest("f", (), 2),)), s, i),
        lambda j, s, i: (dataclasses.replace(j, tests=(*j.tests, ScriptTest("assert f()"))), s, i),
        lambda j, s, i: (dataclasses.replace(j, limits=Limits(timeout_s=3.0)), s, i),
        lambda j, s, i: (dataclasses.replace(j, limits=Limits(timeout_s=2.0, memory_mb=64)), s, i),
        lambda j, s, i: (j, dataclasses.replace(s, memory_mb=s.memory_mb * 2), i),
        lambda j, s, i: (j, dataclasses.replace(s, max_output_kb=1), i),
        lambda j, s, i: (j, s, "sha256:other"),
    ],
    ids=["program", "test-value", "test-added", "timeout", "memory", "default-memory", "output-cap", "image"],
)
def test_cache_key_changes_with_every_part(change):
    base = cache_key(JOB, SB, "sha256:img")
    job, sb, image = change(JOB, SB, "sha256:img")
    assert cache_key(job, sb, image) != base


def test_cache_key_equal_content_hits():
    same = Job(str(JOB.program), tuple(CallTest("f", (), 1) for _ in range(1)), "python", Limits(timeout_s=2.0))
    assert cache_key(same, SandboxConfig(), "sha256:img") == cache_key(JOB, SB, "sha256:img")
    # the limits a job leaves unset resolve to the sandbox's: explicit equal values hit
    unset = dataclasses.replace(JOB, limits=Limits())
    explicit = dataclasses.replace(JOB, limits=Limits(timeout_s=SB.timeout_s, memory_mb=SB.memory_mb))
    assert cache_key(unset, SB, "i") == cache_key(explicit, SB, "i")
    # the worker count does not change a verdict
    assert cache_key(JOB, dataclasses.replace(SB, workers=7), "i") == cache_key(JOB, SB, "i")


def test_cache_key_changes_with_the_harness(monkeypatch: pytest.MonkeyPatch):
    # the sandbox's fingerprint carries the harness: the keys of the same image move with it
    def key(sb: SandboxConfig) -> str:
        return cache_key(JOB, sb, sandbox_fingerprint("sha256:img", "python", sb))

    base = key(SB)
    # a limit the job never sees (the container's process cap) still changes verdicts
    assert key(dataclasses.replace(SB, pids_limit=SB.pids_limit * 2)) != base
    monkeypatch.setattr(image, "executor_hash", lambda: "0" * 16)
    assert key(SB) != base


def test_cache_lru_bound_and_no_infra(tmp_path: Path):
    cache = RewardCache(max_entries=2)
    r = result(P)
    cache.put("a", r)
    cache.put("b", r)
    assert cache.get("a") == r  # a is now the most recent
    cache.put("c", r)
    assert cache.get("b") is None and cache.get("a") == r and cache.get("c") == r
    assert cache.put("d", INFRA) is False and cache.get("d") is None
    assert len(cache) == 2


def flooded(tests: int = 800, failing_from: int = 3) -> Result:
    """A result as the sandbox gives a program that printed its fill of U+FFFD in every test."""
    def loud(i: int) -> str:  # a text of its own per test, as JSON decoding makes them
        return "\ufffd" * 65536 + f"\n[... output truncated at 65536 bytes] {i}"

    made = tuple(TestResult(P if i < failing_from else F, stdout=loud(i), stderr=loud(i),
                            message=f"returned {i}, expected {i + 1}" + "!" * 1000) for i in range(tests))
    return Result(Status.FAIL, failing_from, tests, made)


def test_cache_keeps_the_first_failure_whole_and_drops_other_output():
    import tracemalloc

    cache = RewardCache(10)
    tracemalloc.start()
    fat = flooded()
    before = tracemalloc.get_traced_memory()[0]
    cache.put("k", fat)
    del fat
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    kept = cache.get("k")
    assert [t.verdict for t in kept.tests] == [P] * 3 + [F] * 797 and kept.passed == 3
    first = kept.tests[3]
    assert first.stdout.startswith("\ufffd" * 65536) and first.message.startswith("returned 3, expected 4")
    assert all(not t.stdout and not t.stderr for i, t in enumerate(kept.tests) if i != 3)
    assert all(len(t.message) <= 300 and "left out" in t.message for t in kept.tests[4:])
    assert before > 100e6 and after < 1e6, (before, after)  # ~210 MB as the sandbox sent it, < 1 MB kept
    assert cache.bytes < 1e6


def test_cache_is_bounded_in_bytes_not_only_entries(tmp_path: Path):
    cache = RewardCache(max_entries=1000, max_bytes=2_000_000)
    for i in range(20):
        cache.put(str(i), flooded(100, failing_from=0))
    assert cache.bytes <= 2_000_000 and 1 < len(cache) < 20
    assert cache.get("19") is not None and cache.get("0") is None  # least recently used go first
    lone = RewardCache(max_entries=10, max_bytes=1)
    lone.put("a", result(P))
    lone.put("b", result(F))
    assert len(lone) == 1 and lone.get("b") == result(F)  # the newest stays even over the bound
    disk = RewardCache(10, tmp_path / "r.sqlite", max_bytes=2_000_000)
    disk.put("k", flooded(50))
    disk.close()
    again = RewardCache(10, tmp_path / "r.sqlite")
    assert sum(bool(t.stdout) for t in again.get("k").tests) == 1  # the file holds what memory holds
    again.close()


def test_cache_sqlite_survives_restart(tmp_path: Path):
    path = tmp_path / "sub" / "rewards.sqlite"
    first = RewardCache(10, path)
    first.put("k", result(P, F))
    first.put("infra", INFRA)
    first.close()
    second = RewardCache(10, path)
    assert second.get("k") == result(P, F)
    assert second.get("infra") is None
    second.close()


def test_cache_path_unwritable_is_a_user_error(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(RewardError, match="cache_path"):
        RewardCache(10, blocker / "db.sqlite")


# --------------------------------------------------------------------------- scorer with a fake sandbox


class FakeSandbox:
    """Futures resolved by the test: ``finish()`` runs ``judge(program)`` for each pending job."""

    def __init__(self, judge, backend: str = "local"):
        self.config = SandboxConfig(backend=backend)
        self.backend = backend
        self.judge = judge
        self.pending: list[tuple[Job, Future]] = []
        self.submitted: list[Job] = []

    def fingerprint(self, language: str) -> str:
        return sandbox_fingerprint("local:fake-python", language, self.config)

    def submit(self, job: Job) -> Future:
        fut: Future = Future()
        self.pending.append((job, fut))
        self.submitted.append(job)
        return fut

    def finish(self) -> None:
        pending, self.pending = self.pending, []
        for job, fut in pending:
            fut.set_result(self.judge(job.program))


def test_a_run_is_stored_before_anyone_waiting_on_it_wakes(tmp_path: Path):
    """A caller that returns on the last verdict and opens the store again (the next audit, a
    rerun) finds every verdict there: the store is written before the waiters wake."""
    import threading

    from grpo_code.verify.runs import Runs

    sb = FakeSandbox(lambda program: result(P))
    runs = Runs(sb, RewardCache(10, tmp_path / "r.sqlite"))
    future, source, key = runs.run(JOB)
    seen: list[object] = []
    waiter = threading.Thread(target=lambda: (future.result(), seen.append(runs.cache.get(key))))
    waiter.start()
    slow_put = runs.cache.put

    def put(k, r):  # the waiter would run past a put that came after the wake-up
        threading.Event().wait(0.2)
        return slow_put(k, r)

    runs.cache.put = put
    sb.finish()
    waiter.join(5)
    assert source == "executed" and seen and seen[0] == result(P)
    again = Runs(sb, RewardCache(10, tmp_path / "r.sqlite"))
    assert again.run(JOB)[1] == "cache"


class Scorer:
    """The verifier, the trainer's early jobs and the reward rule, combined as the reward
    function and the trainer combine them."""

    def __init__(self, cfg: RewardsConfig, sb, image_id: str | None = None):
        self.cfg = cfg
        self.verifier = reward_verifier(cfg, sb, [add_task()], image_id=image_id)
        self.early = EarlyJobs(self.verifier, "chat")

    def submit(self, task, text, truncated=False):
        return self.verifier.submit(task, text, "chat", truncated)

    def wait(self, handles):
        return [Scored(j, reward_of(j, h.task, self.cfg)) for j, h in zip(self.verifier.judge(handles), handles)]

    def scores(self, handles):
        return [s.reward for s in self.wait(handles)]

    def submit_early(self, task, text, truncated=False):
        return self.early.submit(task.id, text, truncated)

    def speculate(self, task, text):
        return self.early.speculate(task.id, text)

    def discard_early(self):
        return self.early.discard()

    counts = property(lambda self: self.verifier.counts)
    hit_rate = property(lambda self: self.verifier.runs.hit_rate)
    speculated = property(lambda self: self.early.speculated)
    speculation_wasted = property(lambda self: self.early.speculation_wasted)

    def close(self):
        self.verifier.close()


def add_task(task_id: str = "demo/add") -> Task:
    return Task(task_id, "Write add(a, b).", (CallTest("add", (1, 2), 3), CallTest("add", (0, 0), 0)),
                entry_point="add")


GOOD = "```python\ndef add(a, b):\n    return a + b\n```"
HALF = "```python\ndef add(a, b):\n    return 0\n```"
PROSE = "I am not sure how to do this."


def judge(program: str) -> Result:
    if "return a + b" in program:
        return result(P, P, duration_ms=20.0)
    if "explode" in program:
        return INFRA
    return result(F, P, duration_ms=40.0)


def test_scorer_shares_inflight_and_caches_across_steps():
    sb = FakeSandbox(judge)
    scorer = Scorer(RewardsConfig(), sb, image_id="img")
    task = add_task()
    # same code with different prose around it is the same program
    handles = [scorer.submit(task, c) for c in (GOOD, "Sure!\n" + GOOD, HALF, PROSE)]
    assert [h.source for h in handles] == ["executed", "inflight", "executed", "no_code"]
    assert len(sb.submitted) == 2
    sb.finish()
    scored = scorer.wait(handles)
    assert [s.reward for s in scored] == [1.0, 1.0, 0.5, 0.0]
    # next step: the same programs come from the cache, nothing runs
    again = [scorer.submit(task, c) for c in (GOOD, HALF)]
    assert [h.source for h in again] == ["cache", "cache"]
    assert len(sb.submitted) == 2 and not sb.pending
    assert scorer.scores(again) == [1.0, 0.5]
    assert scorer.counts == {"no_code": 1, "unfinished": 0, "cache": 2, "inflight": 1, "executed": 2}
    assert scorer.hit_rate == pytest.approx(3 / 5)


def test_scorer_never_caches_infra_errors():
    sb = FakeSandbox(judge)
    scorer = Scorer(RewardsConfig(), sb, image_id="img")
    task = add_task()
    bad = "```python\ndef add(a, b):\n    explode()\n```"
    h = scorer.submit(task, bad)
    sb.finish()
    assert scorer.scores([h]) == [None]
    h2 = scorer.submit(task, bad)
    assert h2.source == "executed" and len(sb.submitted) == 2


def test_a_bug_in_host_code_fails_loudly_and_only_a_sandbox_failure_is_masked():
    """A job whose future raises (our host code broke) fails the caller with that error;
    only the sandbox going away under a job is a masked infra_error."""
    task = add_task()
    sb = FakeSandbox(judge)
    scorer = Scorer(RewardsConfig(), sb, image_id="img")
    handle = scorer.submit(task, GOOD)
    [(_, fut)] = sb.pending
    fut.set_exception(KeyError("a bug in our code"))
    with pytest.raises(KeyError, match="a bug in our code"):
        scorer.wait([handle])

    sb = FakeSandbox(judge)
    scorer = Scorer(RewardsConfig(), sb, image_id="img")
    handle = scorer.submit(task, GOOD)
    [(_, fut)] = sb.pending
    fut.set_exception(SandboxError("the sandbox was shut down", "create a new Sandbox"))
    [scored] = scorer.wait([handle])
    assert scored.reward is None and scored.result.status is Status.INFRA_ERROR
    assert "shut down" in scored.result.error


def test_scorer_cache_disabled_runs_everything():
    sb = FakeSandbox(judge)
    scorer = Scorer(RewardsConfig(cache=False), sb, image_id="img")
    hs = [scorer.submit(add_task(), GOOD) for _ in range(3)]
    assert [h.source for h in hs] == ["executed"] * 3 and len(sb.submitted) == 3


def test_scorer_disk_cache_reused_by_a_new_scorer(tmp_path: Path):
    cfg = RewardsConfig(cache_path=str(tmp_path / "c.sqlite"))
    sb = FakeSandbox(judge)
    first = Scorer(cfg, sb, image_id="img")
    h = first.submit(add_task(), HALF)
    sb.finish()
    assert first.scores([h]) == [0.5]
    first.close()
    sb2 = FakeSandbox(judge)
    second = Scorer(cfg, sb2, image_id="img")
    assert second.submit(add_task(), HALF).source == "cache" and not sb2.submitted
    # a different image id misses
    third = Scorer(cfg, sb2, image_id="other")
    assert third.submit(add_task(), HALF).source == "executed"


def test_scorer_reruns_cached_results_after_a_harness_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # the local backend's image id names only the host Python: an executor fix leaves it as it was
    cfg = RewardsConfig(cache_path=str(tmp_path / "c.sqlite"))
    sb = FakeSandbox(judge)
    scorer = Scorer(cfg, sb)
    h = scorer.submit(add_task(), HALF)
    sb.finish()
    assert scorer.scores([h]) == [0.5] and scorer.submit(add_task(), HALF).source == "cache"
    monkeypatch.setattr(image, "executor_hash", lambda: "0" * 16)
    assert scorer.submit(add_task(), HALF).source == "executed" and len(sb.submitted) == 2
    scorer.close()


def record(task_id, text, ended="end", handle=None):
    """A rollout record as training's rollouts make them (token ids are not read here)."""
    from grpo_code.training.rollouts import Rollout

    return Rollout(task_id, [1], [2], text, ended, None, 0, 0.0, handle)


def test_an_early_handle_rides_its_record_into_the_reward_function():
    sb = FakeSandbox(judge)
    scorer = Scorer(RewardsConfig(), sb, image_id="img")
    task = add_task()
    early = scorer.submit_early(task, HALF)
    assert early.source == "executed" and len(sb.submitted) == 1
    [func] = build_reward_funcs(RewardsConfig(), scorer.verifier)

    async def run():
        asyncio.get_running_loop().call_later(0.05, sb.finish)
        return await func(prompts=[None] * 2, completions=[chat(HALF), chat(HALF)], task_id=[task.id] * 2,
                          rollout=[record(task.id, HALF, handle=early), record(task.id, HALF)])

    assert asyncio.run(run()) == [0.5, 0.5]
    # the record's handle is the first row's verdict; the second row shares the running job
    assert [s.source for s in func.last] == ["executed", "inflight"] and len(sb.submitted) == 1
    # a handle of another task (a prompt shared by two tasks) is not taken for this row
    other = record("another", HALF, handle=early)
    assert asyncio.run(func(prompts=[None], completions=[chat(HALF)], task_id=[task.id], rollout=[other])) == [0.5]
    assert func.last[0].source == "cache"


def test_speculation_runs_a_partial_program_once_and_counts_it_as_the_execution():
    sb = FakeSandbox(judge)
    scorer = Scorer(RewardsConfig(), sb, image_id="img")
    task = add_task()
    # the code block has closed; the model is still writing prose after it
    assert scorer.speculate(task, GOOD + "\nThis adds")
    assert not scorer.speculate(task, GOOD + "\nThis adds the two")  # same program: no second job
    assert not scorer.speculate(task, "```python\ndef add(a, b):")  # nothing extractable yet
    assert len(sb.submitted) == 1
    sb.finish()
    final = scorer.submit_early(task, GOOD + "\nThis adds the two numbers.")  # as the rollout does when it ends
    assert final.source == "executed" and len(sb.submitted) == 1
    assert scorer.scores([final]) == [1.0]
    # a second completion with the same program is a plain cache hit
    assert scorer.submit(task, GOOD).source == "cache"
    assert scorer.counts["executed"] == 1 and scorer.counts["cache"] == 1


def test_speculation_starts_after_a_stray_opening_fence():
    # SmolLM2 often opens with an empty fence line, then the tagged block: three fences in all
    sb = FakeSandbox(judge)
    scorer = Scorer(RewardsConfig(), sb, image_id="img")
    task = add_task()
    assert not scorer.speculate(task, "```\n```python\ndef add(a, b):\n    return a + b\n")
    assert scorer.speculate(task, "```\n" + GOOD)
    assert len(sb.submitted) == 1


def test_speculation_on_a_program_that_changes_is_counted_as_wasted():
    sb = FakeSandbox(judge)
    scorer = Scorer(RewardsConfig(), sb, image_id="img")
    task = add_task()
    assert scorer.speculate(task, HALF)
    # the finished completion fixes its code in a second block
    final = scorer.submit_early(task, HALF + "\nOops, fixed:\n" + GOOD)
    assert final.source == "executed" and len(sb.submitted) == 2
    scorer.discard_early()
    assert (scorer.speculated, scorer.speculation_wasted) == (2 - 1, 1)
    assert not Scorer(RewardsConfig(cache=False), sb, image_id="img").speculate(task, GOOD)


# Cut at the length limit inside the code block: the loop never got its body's exit.
CUT_IN_BLOCK = "```python\ndef add(a, b):\n    while a != b:\n        a = a"
CUT_AFTER_BLOCK = GOOD + "\nThis function adds the two numbers and the"


def test_a_program_cut_off_by_the_length_limit_is_not_run():
    sb = FakeSandbox(judge)
    scorer = Scorer(RewardsConfig(), sb, image_id="img")
    task = add_task()
    cut = scorer.submit(task, CUT_IN_BLOCK, truncated=True)
    assert cut.source == "unfinished" and cut.future is None and not sb.submitted
    # the same text that ended on its own (EOS) is a finished program: it runs
    assert scorer.submit(task, CUT_IN_BLOCK).source == "executed"
    # cut in the prose after a closed block: the program is complete and runs
    after = scorer.submit(task, CUT_AFTER_BLOCK, truncated=True)
    assert after.source == "executed" and len(sb.submitted) == 2
    sb.finish()
    scored = scorer.wait([cut, after])
    assert [(s.reward, s.source, s.program) for s in scored][0] == (0.0, "unfinished", CUT_IN_BLOCK.split("\n", 1)[1])
    assert scored[1].reward == 1.0
    assert scorer.counts["unfinished"] == 1


def test_truncated_reward_is_configurable_and_an_unfinished_program_never_runs():
    sb = FakeSandbox(judge)
    task = add_task()
    penalised = Scorer(RewardsConfig(tests=RewardTestsConfig(truncated=-0.5)), sb, image_id="img")
    assert penalised.scores([penalised.submit(task, CUT_IN_BLOCK, truncated=True)]) == [-0.5]
    assert not sb.submitted
    # One rule for training and eval: there is no setting that runs an unfinished program.
    with pytest.raises(ConfigError, match="rewards.tests.truncated"):
        load_config(None, ["rewards.tests.truncated=null"])


def test_completion_text_of_conversations():
    assert completion_text("abc") == "abc"
    assert completion_text([{"role": "assistant", "content": "x"}]) == "x"
    parts = [{"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert completion_text(parts) == "ab"


def test_percentile():
    assert percentile([1, 2, 3, 4, 5], 50) == 3
    assert percentile([10.0], 95) == 10.0
    assert percentile(list(range(101)), 95) == 95


# --------------------------------------------------------------------------- the TRL reward function


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def test_reward_function_with_trl_calling_convention():
    sb = FakeSandbox(judge)
    task = add_task()
    [func] = build_reward_funcs(RewardsConfig(), reward_verifier(RewardsConfig(), sb, [task], image_id="img"))
    prompts = [[{"role": "user", "content": "Write add."}]] * 4
    completions = [chat(GOOD), chat(GOOD), chat(HALF), chat(PROSE)]

    async def run():
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, sb.finish)
        from trl.trainer.utils import is_async_callable

        assert is_async_callable(func)
        return await func(prompts=prompts, completions=completions, completion_ids=None,
                          task_id=[task.id] * 4, log_metric=lambda n, v: metrics.__setitem__(n, v),
                          log_extra=lambda c, v: extra.__setitem__(c, v), trainer_state=None)

    metrics: dict[str, float] = {}
    extra: dict[str, list] = {}
    out = asyncio.run(run())
    assert out == [1.0, 1.0, 0.5, 0.0]
    assert metrics["tests/pass_rate"] == 0.5
    assert metrics["tests/no_code"] == 0.25
    assert metrics["tests/fail"] == pytest.approx(1 / 6)  # one failed test of six judged
    assert metrics["sandbox/executed"] == 2
    assert metrics["sandbox/latency_p50_ms"] == pytest.approx(30.0)
    assert metrics["sandbox/cache_hit_rate"] == pytest.approx(1 / 3)
    assert extra["tests_outcome"] == ["pass", "pass", "fail", "no_code"]


def test_reward_function_reads_truncation_from_the_rollout_records():
    sb = FakeSandbox(judge)
    task = add_task()
    [func] = build_reward_funcs(RewardsConfig(), reward_verifier(RewardsConfig(), sb, [task], image_id="img"))
    texts = [CUT_IN_BLOCK, CUT_IN_BLOCK, CUT_AFTER_BLOCK]
    records = [record(task.id, t, ended) for t, ended in zip(texts, ["length", "end", "length"])]
    metrics: dict[str, float] = {}
    extra: dict[str, list] = {}

    def call(rollout):
        async def run():
            asyncio.get_running_loop().call_later(0.05, sb.finish)
            return await func(prompts=[None] * 3, completions=[chat(t) for t in texts], task_id=[task.id] * 3,
                              rollout=rollout, log_metric=metrics.__setitem__, log_extra=extra.__setitem__)
        return asyncio.run(run())

    out = call(records)
    assert out == [0.0, 0.5, 1.0]  # the twin that ended on its own ran (the fake judge: one test of two)
    assert extra["tests_outcome"] == ["unfinished", "fail", "pass"]
    assert metrics["tests/unfinished"] == pytest.approx(1 / 3)
    assert len(sb.submitted) == 2
    assert {"timing/reward_wait_s", "timing/sandbox_busy_s"} <= set(metrics)
    # without records (scripts and eval call it that way) nothing counts as cut
    assert call(None) == [0.5, 0.5, 1.0]


def test_reward_function_masks_and_fails_loudly():
    sb = FakeSandbox(judge)
    task = add_task()
    bad = "```python\ndef add(a, b):\n    explode()\n```"
    cfg = RewardsConfig(tests=RewardTestsConfig(max_masked_frac=0.5))
    [func] = build_reward_funcs(cfg, reward_verifier(cfg, sb, {task.id: task}, image_id="img"))

    def go(completions):
        async def run():
            asyncio.get_running_loop().call_later(0.02, sb.finish)
            return await func([""] * len(completions), completions, task_id=[task.id] * len(completions))
        return asyncio.run(run())

    assert go([GOOD, bad]) == [1.0, None]  # half masked: allowed
    with pytest.raises(RewardError, match="2 of 3 rewards"):
        go([GOOD, bad, bad + "\n"])


def test_reward_function_needs_task_ids():
    [func] = build_reward_funcs(RewardsConfig(), reward_verifier(RewardsConfig(), FakeSandbox(judge), [add_task()]))
    with pytest.raises(RewardError, match="task_id"):
        asyncio.run(func(["p"], ["c"]))
    with pytest.raises(UnknownTask, match="'nope', which is not in the task set"):  # the one lookup of every path
        asyncio.run(func(["p"], ["c"], task_id=["nope"]))


def test_reward_function_blends_a_model():
    class FixedModel:
        tokenizer = None

        def score(self, texts):
            return [float(len(t)) for t in texts]

    sb = FakeSandbox(judge)
    task = add_task()
    cfg = RewardsConfig(model=RewardModelConfig(path="x", weight=0.1, blend="gate"))
    [func] = build_reward_funcs(cfg, reward_verifier(cfg, sb, [task], image_id="img"), model=FixedModel())
    completions = [GOOD, GOOD + " # longer", HALF]

    async def run():
        asyncio.get_running_loop().call_later(0.02, sb.finish)
        return await func(["p"] * 3, completions, task_id=[task.id] * 3)

    out = asyncio.run(run())
    assert out[1] > out[0] > out[2]
    assert out[0] == pytest.approx(0.95) and out[1] == pytest.approx(1.05)  # span = weight: ±0.05
    assert out[2] == 0.5


def test_configs_stay_valid_and_new_keys_validate():
    for path in Path(__file__).resolve().parent.parent.glob("configs/*.yaml"):
        load_config(path)
    cfg = load_config(None, ["rewards.tests.mode=weighted", "rewards.model.blend=gate", "rewards.cache_size=10"])
    assert cfg.rewards.tests.mode == "weighted" and cfg.rewards.cache_size == 10
    with pytest.raises(ConfigError, match="rewards.tests.mode"):
        load_config(None, ["rewards.tests.mode=best_of"])


def test_parse_remote_scores():
    assert parse_scores({"data": [{"index": 1, "probs": [0.2]}, {"index": 0, "probs": [0.9]}]}, 2) == [0.9, 0.2]
    assert parse_scores({"data": [{"index": 0, "data": [[0.1], [0.4]]}]}, 1) == [0.4]  # per-token: last
    assert parse_scores({"data": [{"index": 0, "score": 3}]}, 1) == [3.0]
    with pytest.raises(ValueError):
        parse_scores({"data": []}, 1)
    with pytest.raises(ValueError):
        parse_scores({"data": [{"index": 0, "label": "x"}]}, 1)


def test_trl_calculate_rewards_runs_our_function_and_masks_none():
    """TRL 1.16's own GRPOTrainer._calculate_rewards (on a stub trainer) calls the function,
    turns None into NaN and collects log_metric values."""
    import threading
    import types
    from collections import defaultdict

    import torch
    from accelerate import PartialState
    from trl import GRPOTrainer
    from trl.trainer.utils import shutdown_event_loop_in_daemon, start_event_loop_in_daemon

    PartialState()  # single-process state for accelerate's gather
    sb = FakeSandbox(judge)
    task = add_task()
    [func] = build_reward_funcs(RewardsConfig(), reward_verifier(RewardsConfig(), sb, [task], image_id="img"))
    thread, loop, ready = start_event_loop_in_daemon()
    ready.wait()
    stub = types.SimpleNamespace(
        accelerator=types.SimpleNamespace(device=torch.device("cpu"), is_main_process=True),
        state=types.SimpleNamespace(global_step=0), args=types.SimpleNamespace(report_to=[]),
        reward_funcs=[func], reward_processing_classes=[None], reward_func_names=["code_reward"],
        environments=None, async_loop=loop, _pending_metrics=defaultdict(list), _pending_extra=defaultdict(list),
    )
    stub._log_metric = lambda n, v: stub._pending_metrics[n].append(v)
    stub._log_completion_extra = lambda c, v: stub._pending_extra[c].extend(v)
    bad = "```python\ndef add(a, b):\n    explode()\n```"
    completions = [chat(GOOD), chat(HALF), chat(bad), chat(PROSE)]
    inputs = [{"prompt": [{"role": "user", "content": "Write add."}], "task_id": task.id} for _ in completions]
    timer = threading.Timer(0.1, sb.finish)
    timer.start()
    try:
        out = GRPOTrainer._calculate_rewards(stub, inputs, [i["prompt"] for i in inputs], completions, None)
    finally:
        timer.join()
        shutdown_event_loop_in_daemon(thread, loop)
    assert out[:, 0].tolist()[:2] == [1.0, 0.5] and out[3, 0].item() == 0.0
    assert torch.isnan(out[2, 0])
    assert stub._pending_metrics["tests/masked"] == [0.25]
    assert stub._pending_extra["tests_outcome"] == ["pass", "fail", "masked", "no_code"]
