"""``grpo-code tasks audit`` (grpo_code/verify/audit.py, mutants.py, shortcuts.py): shortcuts
find a weak test, mutants score the tests, both deterministic, cached and loud on the
sandbox's failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grpo_code.cli import app
from grpo_code.config import SandboxConfig
from grpo_code.errors import SuiteError
from grpo_code.sandbox import Sandbox
from grpo_code.tasks.suite import suite_from_records
from grpo_code.verify.audit import audit_suite, audited_weak, require_clean, save_last
from grpo_code.verify.mutants import python_mutants, text_mutants
from grpo_code.verify.store import RewardCache

runner = CliRunner()

CLAMP = "def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n    return x\n"
RECORDS = [
    # weak: one test, answered by the constant 0
    {"id": "weak", "prompt": "Clamp x to [lo, hi].", "entry_point": "clamp", "reference": CLAMP,
     "tests": [{"kind": "call", "fn": "clamp", "args": [0, 0, 5], "expected": 0}]},
    # strong: the boundaries are tested
    {"id": "strong", "prompt": "Clamp x to [lo, hi].", "entry_point": "clamp", "reference": CLAMP,
     "tests": [{"kind": "call", "fn": "clamp", "args": a, "expected": e} for a, e in
               (([-1, 0, 5], 0), ([0, 0, 5], 0), ([1, 0, 5], 1), ([5, 0, 5], 5), ([6, 0, 5], 5), ([4, 0, 5], 4))]},
    # stdin/stdout that only checks the sample it shows
    {"id": "echo", "prompt": "Print twice the number.", "reference": "print(2 * int(input()))\n",
     "tests": [{"kind": "io", "stdin": "3\n", "stdout": "6\n"}],
     "public_tests": [{"kind": "io", "stdin": "3\n", "stdout": "6\n"}]},
]


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(backend="local", workers=2, timeout_s=5.0)) as sb:
        yield sb


def audit(sandbox, tmp_path: Path, **kwargs):
    suite = suite_from_records("audited", RECORDS, "test")
    return audit_suite(suite, sandbox, cache=RewardCache(path=tmp_path / "audit.sqlite"), **kwargs)


def test_a_weak_test_is_hackable_by_the_shortcut_that_passes_and_a_strong_one_is_not(sandbox, tmp_path) -> None:
    report = audit(sandbox, tmp_path, min_score=0.7)
    by_id = {t.task_id: t for t in report.tasks}
    assert by_id["weak"].hackable and "returns 0" in by_id["weak"].shortcuts
    assert "returns its first argument" in by_id["weak"].shortcuts
    # clamp's `<` and `<=` agree at the boundary (equivalent mutants): only those survive
    assert not by_id["strong"].hackable
    assert {s.description for s in by_id["strong"].survivors} == {"line 2: < -> <=", "line 4: > -> >="}
    assert by_id["weak"].score < by_id["strong"].score and by_id["weak"].survivors
    assert by_id["echo"].shortcuts == ["prints the sample outputs"]
    summary = report.summary()
    assert summary["hackable"] == ["weak", "echo"] and "strong" not in summary["weak"]
    assert not summary["infra_errors"]
    require_clean(report)


def test_mutants_are_deterministic_and_the_score_repeats_from_the_cache(sandbox, tmp_path) -> None:
    first = python_mutants(CLAMP, 10)
    assert [m.program for m in first] == [m.program for m in python_mutants(CLAMP, 10)]
    assert all(m.program != CLAMP for m in first) and len({m.program for m in first}) == len(first)
    one = audit(sandbox, tmp_path)
    two = audit(sandbox, tmp_path)
    assert [t.to_dict() for t in one.tasks] == [t.to_dict() for t in two.tasks]
    assert one.cached == 0 and two.cached == two.programs > 0


def test_text_mutants_leave_strings_comments_and_includes_alone() -> None:
    program = '#include <vector>\n// a < b\nint f(int a) { return a < 3 ? a + 1 : 0; } // "x"\nconst std::string s = "<";\n'
    changed = {m.description for m in text_mutants(program, "cpp")}
    assert "line 3: < -> <=" in changed and "line 3: + -> -" in changed and "line 3: 3 -> 4" in changed
    assert not any(m.line in (1, 2, 4) for m in text_mutants(program, "cpp"))


def test_a_stronger_suite_tells_gaps_from_equivalent_survivors(sandbox, tmp_path) -> None:
    stronger = suite_from_records("audited-plus", [RECORDS[1] | {"id": "weak"}], "test")
    report = audit(sandbox, tmp_path, stronger=stronger)
    weak = next(t for t in report.tasks if t.task_id == "weak")
    assert {s.verdict_in_stronger for s in weak.survivors} <= {"rejected", "survives"}
    assert any(s.verdict_in_stronger == "rejected" for s in weak.survivors)
    equivalent = {s.description for s in weak.survivors if s.verdict_in_stronger == "survives"}
    assert equivalent == {"line 2: < -> <=", "line 4: > -> >="}


def test_training_says_and_drops_what_the_last_audit_found_weak(sandbox, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GRPO_CODE_CACHE", str(tmp_path / "cache"))
    suite = suite_from_records("audited", RECORDS, "test")
    lines: list[str] = []
    with pytest.raises(SuiteError, match="has not been audited"):
        audited_weak(suite, suite, True, 0.8, lines.append)
    assert audited_weak(suite, suite, False, 0.8, lines.append) is suite and not lines
    save_last(audit(sandbox, tmp_path))
    kept = audited_weak(suite, suite, True, 0.7, lines.append)
    assert [t.id for t in kept.tasks] == ["strong"]
    assert "found 2 of 3 train tasks weak (2 hackable" in lines[-1] and "training on 1" in lines[-1]
    with pytest.raises(SuiteError, match="found 3 of 3 train tasks weak.*none is left"):
        audited_weak(suite, suite, True, 0.8, lines.append)


def test_the_cli_prints_the_weak_tasks_and_refuses_bad_options(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GRPO_CODE_CACHE", str(tmp_path / "cache"))
    suite = tmp_path / "s"
    suite.mkdir()
    (suite / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    result = runner.invoke(app, ["tasks", "audit", str(suite), "--backend", "local", "--mutants", "5", "--json",
                                 "--out", str(tmp_path / "audited")])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["hackable"] == ["weak", "echo"] and summary["tasks"] == 3
    assert json.loads((tmp_path / "audited" / "audit.json").read_text())["hackable"] == ["weak", "echo"]
    pytest.importorskip("matplotlib")
    plotted = runner.invoke(app, ["report", str(tmp_path / "audited"), "--out", str(tmp_path / "report")])
    assert plotted.exit_code == 0, plotted.output
    assert (tmp_path / "report" / "audit_mutation_scores.png").is_file()
    assert (tmp_path / "report" / "audit_shortcuts.png").is_file()
    assert "Test audits" in (tmp_path / "report" / "report.html").read_text()
    text = runner.invoke(app, ["tasks", "audit", str(suite), "--backend", "local", "--mutants", "5"])
    assert text.exit_code == 0 and "2 of 3 tasks hackable" in text.output and "returns 0" in text.output
    bad = runner.invoke(app, ["tasks", "audit", str(suite), "--mutants", "-1"])
    assert bad.exit_code == 2 and "--mutants -1" in bad.output
    checked = runner.invoke(app, ["tasks", "check", str(suite), "--backend", "local", "--audit", "--json"])
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.stdout)["audit"]["hackable"] == ["weak", "echo"]
