"""Go, Rust, Java and TypeScript on docker (grpo_code/sandbox/executor/toolchain.py and the
language runners): every test kind gets its own verdict, call tests are attested, and the
runaway programs and reward hacks of tests/toolchain_cases.py never pass, never leave an
infra_error, and leave the pool serving the next job."""

from __future__ import annotations

import pytest
import toolchain_cases as cases

from conftest import need_image
from grpo_code.config import SandboxConfig
from grpo_code.sandbox import Sandbox, Status, Verdict

LANGS = tuple(cases.LANGS)
ATTESTED_SCRIPTS = {"typescript"}  # judged in a process of their own, as JavaScript's
HACKS = sorted(cases.GO.hacks)
REPORTING = {"exits 0 at start", "exits 0 in the call", "forges the report", "reads the payload for the nonce"}
# What each runaway may end as; the hacks must fail.
ENDS = {
    "loops forever": {Verdict.TIMEOUT},
    "sleeps forever": {Verdict.TIMEOUT},
    "allocates without end": {Verdict.MEMORY, Verdict.TIMEOUT},
    "floods stdout": {Verdict.TIMEOUT, Verdict.OUTPUT_LIMIT, Verdict.FAIL, Verdict.RUNTIME_ERROR},
}


@pytest.fixture(scope="module")
def sandbox(docker_ready):
    for language in LANGS:
        need_image(language)
    sb = Sandbox(SandboxConfig(backend="docker", workers=2, timeout_s=2.0, memory_mb=256))
    yield sb
    sb.close()


def verdicts(result) -> list[str]:
    return [t.verdict.value for t in result.tests]


@pytest.mark.docker
@pytest.mark.parametrize("language", LANGS)
def test_every_test_kind_gets_its_own_verdict_and_calls_are_attested(sandbox, language):
    jobs, expected = cases.mixed(language)
    results = sandbox.run(jobs)
    assert [verdicts(r) for r in results] == expected, results
    for result in results:
        for test, kind in zip(result.tests, [t.kind for t in jobs[0].tests]):
            assert test.attested is (kind != "script" or language in ATTESTED_SCRIPTS), (kind, test)
    [broken] = sandbox.run([cases.Job(cases.LANGS[language].syntax_error, jobs[0].tests, language=language,
                                      limits=cases.LIMITS)])
    assert set(verdicts(broken)) == {"compile_error"} and broken.tests[0].message, broken


@pytest.mark.docker
@pytest.mark.parametrize("language", LANGS)
def test_runaways_and_reward_hacks_never_pass(sandbox, language):
    lang = cases.LANGS[language]
    # Hacks aimed at the report go at both harnesses; a runaway needs one process to show it
    # ends (the script harness runs the same program the same way). One batch: the pool's
    # workers take them side by side.
    jobs = [cases.job(language, lang.hacks[hack]) if hack in REPORTING
            else cases.job(language, lang.hacks[hack], cases.call(language)) for hack in HACKS]
    results = sandbox.run(jobs)
    for hack, result in zip(HACKS, results):
        assert result.status is not Status.INFRA_ERROR, (hack, result)
        allowed = ENDS.get(hack, {Verdict.FAIL, Verdict.RUNTIME_ERROR, Verdict.TIMEOUT, Verdict.MEMORY})
        for test in result.tests:
            assert test.verdict in allowed, (hack, test)
    # fork bombs, leftover processes and memory bombs leave the pool serving the next jobs
    again = sandbox.run([cases.job(language, lang.right)] * 2)
    assert all(r.status is Status.PASS for r in again), again
