"""Thread ids a --db run keeps: Postgres indexes them, so one too long for its index is refused before the run.

SQLite takes any text as a thread id; Postgres' checkpoint tables index the
thread id (with the namespace and version) in a btree, whose entries hold at
most 2,704 bytes. A longer random id failed mid-run with the index's error,
which did not name --thread; it is a usage error now (exit 2), and ids up to
1,024 bytes run.
"""

from __future__ import annotations

import random
import string

import pytest

from deep_agent.cli._errors import UsageError
from deep_agent.cli._store import MAX_DB_THREAD_ID_BYTES, check_thread_id
from helpers.postgres import cli, project, rows  # noqa: F401 - the project fixture

pytestmark = pytest.mark.postgres


def random_id(size: int) -> str:
    rnd = random.Random(size)  # random letters: a btree entry compresses repeated ones, so "a" * n would pass
    return "".join(rnd.choice(string.ascii_letters) for _ in range(size))


def test_the_longest_id_runs_and_a_longer_one_is_refused_before_anything_is_written(project, postgres_url):
    longest = random_id(MAX_DB_THREAD_ID_BYTES)
    ran = cli("run", "Compare LangGraph and Pydantic.", "--thread", longest, "--db", postgres_url, cwd=project)
    assert ran.returncode == 0, ran.stderr

    too_long = random_id(3000)
    refused = cli("run", "Compare LangGraph and Pydantic.", "--thread", too_long, "--db", postgres_url, cwd=project)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("deep-agent: error: --thread") and "3,000 bytes" in refused.stderr
    assert refused.stderr.strip().count("\n") == 0, refused.stderr
    assert rows(postgres_url, "SELECT count(*) FROM checkpoints WHERE thread_id = %s", too_long) == [(0,)]


def test_only_a_database_limits_the_length_and_refuses_nul():
    assert check_thread_id(random_id(5000)) == random_id(5000)  # SQLite keeps any text
    for bad in (random_id(MAX_DB_THREAD_ID_BYTES + 1), "a\x00b", "\u00e9" * 600):
        with pytest.raises(UsageError, match="--thread .* at most 1,024 bytes of UTF-8 with no NUL"):
            check_thread_id(bad, "postgresql://me@127.0.0.1/agents")
    assert check_thread_id("\u00e9" * 512, "postgresql://me@127.0.0.1/agents") == "\u00e9" * 512
