"""The task table: O(1) lookups; finished tasks evicted oldest first, by age and by bytes."""

from __future__ import annotations

import pytest

from subagents.background._runtime import TaskTable


def test_finished_tasks_are_evicted_by_age_oldest_first():
    table: TaskTable[str] = TaskTable(max_age_s=10, max_bytes=10**9)
    for i in range(3):
        table[f"t{i}"] = f"task {i}"
    assert table.settle("t0", size=5, at=100.0) == pytest.approx(10.0)
    table.settle("t1", size=5, at=104.0)
    assert table.evict(109.0) == pytest.approx(1.0)
    assert table.evict(110.0) == pytest.approx(4.0) and "t0" not in table and "t1" in table
    assert "t2" in table and table.evict(10**6) is None and list(table.unsettled()) == ["task 2"]


def test_finished_tasks_are_evicted_by_bytes_and_live_ones_never():
    table: TaskTable[str] = TaskTable(max_age_s=3600, max_bytes=100)
    for i in range(4):
        table[f"t{i}"] = f"task {i}"
    table.settle("t0", size=60, at=1.0)
    table.settle("t1", size=30, at=2.0)
    assert table.settled_bytes == 90 and len(table) == 4
    table.settle("t2", size=30, at=3.0)  # 120 > 100: the oldest goes
    assert "t0" not in table and table.settled_bytes == 60
    table.settle("t3", size=500, at=4.0)  # bigger than the budget alone: all finished ones go
    assert len(table) == 0 and table.settled_bytes == 0


def test_a_revived_task_is_not_evicted_and_settling_again_counts_it_once():
    table: TaskTable[str] = TaskTable(max_age_s=1, max_bytes=100)
    table["t"] = "task"
    table.settle("t", size=40, at=0.0)
    table.settle("t", size=50, at=0.5)
    assert table.settled_bytes == 50
    table.revive("t")
    assert table.settled_bytes == 0 and table.evict(99.0) is None and "t" in table
    assert table.settle("missing", size=10, at=0.0) is None  # unknown ids are ignored


@pytest.mark.parametrize("kwargs", [{"max_age_s": 0}, {"max_age_s": -1}, {"max_bytes": -1}])
def test_bad_limits_are_refused_with_their_name(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        TaskTable(**kwargs)
