"""The bench cannot rot: every measure runs at tiny sizes and prints a well-formed record.

The figures themselves are not asserted (they live in ``bench/`` and the
README). Our side always runs; deepagents' side runs only when the ``bench``
extra is installed, and only the test about it needs deepagents.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from typing import Any

import pytest
from helpers import REPO as ROOT

FIELDS = {"measure", "unit", "ours", "theirs", "ratio", "goal", "met", "sizes", "notes"}
PEERLESS = ("background", "budget.", "fanout.ainvoke.cap", "fanout.invoke.cap", "wrapup.")
"""Records with no deepagents counterpart: theirs is always null."""


QUICK_RUN = pytest.mark.xdist_group("bench-quick-run")
"""On every test that reads ``quick_run``: one worker runs them all, so the quick bench (25 s of CPU) runs once."""


@pytest.fixture(scope="module")
def quick_run() -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # a hung run's bound, not a budget: a busy machine took over 180 s
    )
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {"records": records, "stdout": done.stdout}


def _quick_records(*args: str, timeout: float = 600) -> list[dict[str, Any]]:
    """The records ``python -m bench --quick ARGS`` prints (it must exit 0)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-m", "bench", "--quick", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@QUICK_RUN
def test_every_measure_prints_a_well_formed_record_for_our_side(quick_run: dict[str, Any]) -> None:
    from bench import MEASURES

    records = quick_run["records"]
    names = {r["measure"].split(".")[0] for r in records}
    assert names == set(MEASURES)
    for rec in records:
        assert FIELDS <= rec.keys(), rec
        assert _is_number(rec["ours"]), rec
        assert rec["theirs"] is None or _is_number(rec["theirs"]), rec
        assert rec["ratio"] is None or _is_number(rec["ratio"]), rec
        assert isinstance(rec["sizes"], dict) and rec["sizes"], rec
        assert isinstance(rec["goal"], str) and rec["goal"], rec
        assert isinstance(rec["notes"], str) and rec["notes"], rec
        assert rec["met"] is None, "quick sizes must not claim a goal"
    assert len({r["measure"] for r in records}) == len(records), "measure names are unique"


@QUICK_RUN
def test_the_table_and_total_follow_the_json(quick_run: dict[str, Any]) -> None:
    lines = quick_run["stdout"].splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("measure "))
    assert all(not line.startswith("{") for line in lines[header:])
    assert any(" records in " in line for line in lines[header:])


@QUICK_RUN
def test_theirs_is_measured_when_deepagents_is_installed(quick_run: dict[str, Any]) -> None:
    pytest.importorskip("deepagents")
    for rec in quick_run["records"]:
        if rec["measure"].startswith(PEERLESS):
            assert rec["theirs"] is None, rec
        else:
            assert _is_number(rec["theirs"]), rec
            assert rec["ratio"] is None or _is_number(rec["ratio"]), rec


def test_unknown_measure_is_refused() -> None:
    from bench import run_measures

    with pytest.raises(ValueError, match="unknown measure"):
        run_measures(["no-such-measure"], quick=True)


def test_the_scale_set_runs_at_tiny_sizes_and_stays_opt_in() -> None:
    from bench import MEASURES
    from bench.suite import SCALE_MEASURES

    assert not set(SCALE_MEASURES) & set(MEASURES), "--scale takes minutes: never in the default run"
    # One process for both (each start imports the stack): retained is 10,000 runs a side at full size, opt-in
    # with the scale set.
    both = _quick_records("--only", "scale,retained")
    records = [r for r in both if r["measure"] != "retained"]
    assert {r["measure"] for r in records} == {
        "scale.sqlite.growth", "scale.sqlite.db_bytes", "scale.ledger.reducer", "scale.ledger.run", "scale.ledger.record_bytes",
        "scale.wide", "scale.agents_block"}
    for rec in records:
        assert FIELDS <= rec.keys() and _is_number(rec["ours"]) and rec["met"] is None, rec
    retained = [r for r in both if r["measure"] == "retained"]
    assert len(retained) == 1 and "retained" in SCALE_MEASURES
    assert _is_number(retained[0]["ours"]), retained


def test_the_long_thread_measure_runs_each_side_in_a_process_of_its_own_and_stays_opt_in() -> None:
    from bench import MEASURES
    from bench.suite import SCALE_MEASURES

    assert "long_thread" in SCALE_MEASURES and "long_thread" not in MEASURES, "minutes: only with --scale"
    records = {r["measure"]: r for r in _quick_records("--no-peer", "--only", "long_thread", "--runs", "4")}
    assert set(records) == {"long_thread.sqlite.db_bytes", "long_thread.sqlite.bytes_per_run",
                            "long_thread.sqlite.growth_cpu", "long_thread.sqlite.cpu_slope_us",
                            "long_thread.sqlite.reload_ms",
                            "long_thread.memory.rss_growth_bytes",
                            "long_thread.middleware.sqlite.last_cpu_ms", "long_thread.middleware.sqlite.reload_ms",
                            "long_thread.middleware.sqlite.db_bytes", "long_thread.middleware.sqlite.growth_cpu",
                            # on the tests' own Postgres server, which the bench starts as they do
                            "long_thread.middleware.postgres.last_cpu_ms",
                            "long_thread.middleware.postgres.reload_ms",
                            "long_thread.middleware.postgres.db_bytes", "long_thread.middleware.postgres.growth_cpu"}
    assert {r["sizes"]["sequential_delegations"] for r in records.values()} == {4}
    for rec in records.values():
        assert FIELDS <= rec.keys() and _is_number(rec["ours"]) and rec["theirs"] is None, rec
    detail = records["long_thread.sqlite.db_bytes"]["detail"]
    # Every run stored something, and the root wrote a checkpoint per step of each run.
    assert records["long_thread.sqlite.bytes_per_run"]["ours"] > 0 and detail["ours_root_checkpoints_per_run"] >= 5
    assert records["long_thread.sqlite.reload_ms"]["ours"] > 0
    postgres = records["long_thread.middleware.postgres.db_bytes"]
    assert postgres["sizes"]["checkpointer"] == "PostgresSaver" and postgres["detail"]["ours_stored_bytes"] > 0


def test_the_instructions_set_counts_a_delegation_under_cachegrind_and_stays_opt_in() -> None:
    """Needs valgrind (Debian's package, which `.ci/run` installs): without it this fails saying so."""
    from bench import MEASURES
    from bench.suite import INSTRUCTION_MEASURES

    assert not set(INSTRUCTION_MEASURES) & set(MEASURES), "--instructions takes minutes: never in the default run"
    rec, misses = _quick_records("--no-peer", "--only", "instructions", timeout=900)
    assert rec["measure"] == "instructions.invoke" and FIELDS <= rec.keys() and rec["met"] is None, rec
    detail = rec["detail"]
    # A delegating run does all a no-op run does and runs a child graph besides: millions of instructions more.
    assert detail["ours_task_run_m"] > detail["ours_noop_run_m"] > 1, rec
    assert _is_number(rec["ours"]) and rec["ours"] > 1 and rec["theirs"] is None, rec
    # The same runs' simulated last-level misses: a child graph's code and data do not fit in 1 MiB unmissed.
    assert misses["measure"] == "instructions.invoke.cache_misses" and FIELDS <= misses.keys(), misses
    assert misses["detail"]["ours_task_run_k"] > misses["detail"]["ours_noop_run_k"] > 0, misses
    assert _is_number(misses["ours"]) and misses["ours"] > 0 and misses["sizes"]["cache"].endswith("1048576,16,64")


def test_the_instructions_set_without_valgrind_says_what_to_install() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["PATH"] = str(ROOT / "no-such-folder")
    done = subprocess.run([sys.executable, "-m", "bench", "--quick", "--no-peer", "--only", "instructions"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "needs valgrind" in done.stderr, done.stderr[-2000:]


@QUICK_RUN
def test_the_footprint_counts_the_code_only_a_delegation_runs(quick_run: dict[str, Any]) -> None:
    (rec,) = [r for r in quick_run["records"] if r["measure"] == "footprint.invoke"]
    detail = rec["detail"]
    # Our delegation runs our own packages' code, which a no-op tool call never enters.
    assert detail["ours_functions"] > 20 and rec["ours"] > 1000, rec
    assert {"subagents", "middleware"} <= detail["ours_bytes_by_package"].keys(), rec
    # The record keeps 4 significant digits (32614 is 32610.0): the exact sum is compared rounded alike.
    assert float(f"{sum(detail['ours_bytes_by_package'].values()):.4g}") <= rec["ours"], rec
    if rec["theirs"] is not None:
        assert "deepagents" in detail["theirs_bytes_by_package"] and "subagents" not in detail["theirs_bytes_by_package"]


def test_the_knockout_set_runs_at_tiny_sizes_and_stays_opt_in() -> None:
    from bench import MEASURES
    from bench.suite import KNOCKOUT_MEASURES

    assert not set(KNOCKOUT_MEASURES) & set(MEASURES), "--only knockout takes minutes: never in the default run"
    records = _quick_records("--only", "knockout")
    assert [r["measure"] for r in records] == [f"knockout.{mode}.{level}" for mode in ("invoke", "ainvoke")
                                               for level in ("shipped", "uncopied_reply", "no_meter",
                                                             "no_meter_metadata", "bare")]
    for rec in records:
        assert FIELDS <= rec.keys() and _is_number(rec["ours"]) and rec["met"] is None, rec


def test_each_knockout_level_takes_off_what_it_names_and_the_patches_are_undone() -> None:
    """The knock-out is an instrument: a level that silently kept its part would make its figure a lie."""
    import middleware._subagents as delegating
    from bench import knockout, overhead
    from subagents._runner import Delegation

    original = (Delegation.configure, Delegation.open_transcript, delegating.outcome_command)
    agent = overhead._agents()["ours"]
    seen: dict[str, dict[str, Any]] = {}
    replies: dict[str, Any] = {}
    configure = Delegation.configure
    with knockout._switchable() as switch:
        patched, command = Delegation.configure, delegating.outcome_command

        def spy(self: Any, spec: Any, **kwargs: Any) -> None:
            patched(self, spec, **kwargs)
            seen[switch["level"]] = dict(self.config)

        def reply_spy(*args: Any, **kwargs: Any) -> Any:
            replies[switch["level"]] = reply = command(*args, **kwargs)
            return reply

        Delegation.configure = spy  # type: ignore[method-assign]
        delegating.outcome_command = reply_spy
        try:
            states = {}
            for level in knockout.LEVELS:
                switch["level"] = level
                states[level] = agent.invoke(overhead.DELEGATE)
        finally:
            Delegation.configure = patched  # type: ignore[method-assign]
            delegating.outcome_command = command
    assert (Delegation.configure, Delegation.open_transcript, delegating.outcome_command) == original
    assert configure is original[0]
    for level, state in states.items():  # every level still delegates and answers
        (answer,) = [m for m in state["messages"] if m.type == "tool"]
        assert "done" in answer.text, (level, answer)
    assert seen["shipped"]["callbacks"] and not seen["no_meter"]["callbacks"]
    assert "subagent_tool_call_id" in seen["no_meter"]["metadata"]
    assert list(seen["no_meter_metadata"]["metadata"]) == ["subagent_task_id"]
    (shipped,) = states["shipped"]["subagent_tasks"].values()
    (unmetered,) = states["no_meter_metadata"]["subagent_tasks"].values()
    assert shipped["model_calls"] == 1 and unmetered["model_calls"] == 0  # nothing counted the child's call
    assert shipped["transcript"].startswith("memory:")
    assert not states["bare"].get("subagent_tasks") and not states["bare"].get("subagent_usage")
    # uncopied_reply is shipped with only the reply's form changed: the same record, usage and answer, and
    # the tool node passed its ToolMessage on as it was (shipped's dict reply reaches the state as a copy).
    assert seen["uncopied_reply"]["callbacks"] and seen["uncopied_reply"].keys() == seen["shipped"].keys()
    assert seen["uncopied_reply"]["metadata"].keys() == seen["shipped"]["metadata"].keys()
    assert isinstance(replies["shipped"].update, dict) and isinstance(replies["uncopied_reply"].update, tuple)
    (uncopied,) = states["uncopied_reply"]["subagent_tasks"].values()
    assert uncopied.keys() == shipped.keys() and uncopied["model_calls"] == 1
    assert states["uncopied_reply"]["subagent_usage"] == states["shipped"]["subagent_usage"]
    answers = {level: next(m for m in states[level]["messages"] if m.type == "tool")
               for level in ("shipped", "uncopied_reply")}
    assert answers["uncopied_reply"] is dict(replies["uncopied_reply"].update)["messages"][0]
    assert answers["shipped"] is not replies["shipped"].update["messages"][0]


@QUICK_RUN
def test_the_budget_scenario_prints_a_row_per_usage_report_and_mode(quick_run: dict[str, Any]) -> None:
    from bench.budget import ROWS

    records = [r for r in quick_run["records"] if r["measure"].startswith("budget.")]
    assert {r["measure"] for r in records} == {f"budget.{row}.{mode}" for row in ROWS for mode in ("invoke", "ainvoke")}
    assert {"honest", "absent", "zero", "denser4x", "denser16x"} <= set(ROWS)
    for rec in records:
        assert rec["unit"] == "tree spend / limit" and _is_number(rec["ours"]) and rec["ours"] > 0, rec
