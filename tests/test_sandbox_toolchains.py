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
EXITS = {"exits 0 at start", "exits 0 in the call"}
"""Go at both harnesses; the other hacks at the call harness, whose tests are attested (a script
test of most of these languages runs in the program's process, ``attested: false``)."""
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
    for job, result in zip(jobs, results):
        for test, kind in zip(result.tests, [t.kind for t in job.tests]):
            assert test.attested is (kind != "script" or language in ATTESTED_SCRIPTS), (kind, test)
    [broken] = sandbox.run([cases.Job(cases.LANGS[language].syntax_error, jobs[0].tests, language=language,
                                      limits=cases.LIMITS)])
    assert set(verdicts(broken)) == {"compile_error"} and broken.tests[0].message, broken


@pytest.mark.docker
@pytest.mark.parametrize("language", LANGS)
def test_runaways_and_reward_hacks_never_pass(sandbox, language):
    lang = cases.LANGS[language]
    # One batch: the pool's workers take them side by side; a compiled language's runaways
    # share one build (cases.runaways).
    combined = cases.runaways(language)
    alone = [h for h in HACKS if combined is None or h not in combined[1]]
    jobs = [cases.job(language, lang.hacks[hack]) if hack in EXITS
            else cases.job(language, lang.hacks[hack], cases.call(language)) for hack in alone]
    results = sandbox.run(jobs + ([combined[0]] if combined else []))
    ended = [(hack, result.tests) for hack, result in zip(alone, results)]
    if combined is not None:
        ended += [(hack, [test]) for hack, test in zip(combined[1], results[-1].tests)]
    assert all(r.status is not Status.INFRA_ERROR for r in results), results
    for hack, tests in ended:
        allowed = ENDS.get(hack, {Verdict.FAIL, Verdict.RUNTIME_ERROR, Verdict.TIMEOUT, Verdict.MEMORY})
        for test in tests:
            assert test.verdict in allowed, (hack, test)
    # fork bombs, leftover processes and memory bombs leave the pool serving the next jobs
    [again] = sandbox.run([cases.job(language, lang.right, cases.call(language))])
    assert again.status is Status.PASS, again
