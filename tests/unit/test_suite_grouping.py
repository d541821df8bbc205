"""The suite's own promise: tests marked with one ``xdist_group`` run on one worker.

Servers shared by a module and the examples of one docs page (which share a
namespace, top to bottom) rely on it. pytest-xdist carries the group in the
node id; when a pytest release changes how node ids are stored the groups are
silently dropped (it happened with pytest 9.2), so this test fails instead.
"""

from __future__ import annotations

import pytest


@pytest.mark.xdist_group("suite-grouping-canary")
def test_a_grouped_test_carries_its_group_to_the_scheduler(request: pytest.FixtureRequest) -> None:
    # On a worker, pytest-xdist sets `loadgroup` when the run was started with `--dist loadgroup`.
    if getattr(request.config.option, "loadgroup", False):
        assert request.node.nodeid.endswith("@suite-grouping-canary"), request.node.nodeid

