"""Knock-out (opt-in: ``--only knockout``): what each part of our governance costs a delegation.

The overhead measure (:mod:`bench.overhead`) compares a delegation with all
of our governance on against deepagents'. This one takes the parts off one
layer at a time, in one process, the kinds interleaved, so that the gap can
be read as a sum of parts rather than guessed at:

* ``shipped`` -- as the library ships it;
* ``uncopied_reply`` -- as shipped, but the ``task`` reply's update handed
  to LangGraph as ``(key, value)`` pairs, a form ``Command`` accepts and the
  tool node passes on without its deep copy (it copies a dict update): what
  that copy of the reply costs, record and usage included. Not shipped,
  since other code reads the update as a dict (bench/README.md, "Where the
  instructions go"); this level is the other side of that trade-off, by the
  clock. It stands alone: the levels below start again from ``shipped``;
* ``no_meter`` -- the child runs without the callback handler that meters
  it: no ``max_turns``, usage, deadline, cancellation or budget checks, and
  no transcript recorded while it runs;
* ``no_meter_metadata`` -- also without the run metadata beyond the task id
  (``subagent_tool_call_id``) that tracing and stream consumers read;
* ``bare`` -- also without the transcript and without the ledger record and
  usage rollup in the parent's update: the ``task`` tool then does what
  deepagents' does (isolate, run the child, answer), through our code.

None of these is a configuration the library offers: they are switched by
patching three internal functions for the length of this measure, every level
(``shipped`` included) through the same wrappers, so the wrappers cost all
levels alike. Each level's figure is the CPU median of a delegating run
minus that of a no-op run, as in the overhead measure, over ``runs`` runs
of every kind; the goal is ``report``.

Example::

    python -m bench --only knockout
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from unittest import mock

from langgraph.types import Command

import middleware._subagents as delegating
import middleware._task_tool as task_tool
import subagents._runner as runner
from bench import overhead
from bench.common import OURS, THEIRS, acpu_and_wall, cpu_and_wall, median, quiet_gc, record, sides, theirs_note
from subagents._metering import metered_apart
from subagents._runner import Delegation

NAME = "knockout"
LEVELS = ("shipped", "uncopied_reply", "no_meter", "no_meter_metadata", "bare")
"""Our side as shipped, with its reply uncopied, then with fewer and fewer parts of the governance."""

_UNCOPIED = frozenset({"uncopied_reply"})
_METER_OFF = frozenset(LEVELS[2:])
_METADATA_OFF = frozenset(LEVELS[3:])
_RECORDS_OFF = frozenset(LEVELS[4:])


class _NoTranscript:
    """A sink that keeps nothing (``records = False``: no recorder is attached)."""

    records = False

    def end(self, messages: Any, *, cancelled: bool = False) -> None:
        return None


@contextlib.contextmanager
def _switchable() -> Iterator[dict[str, str]]:
    """Patch the four places the levels differ; the returned dict's ``level`` picks one per run."""
    level = {"level": "shipped"}
    configure, open_transcript, command = Delegation.configure, Delegation.open_transcript, task_tool.outcome_command

    def configure_at_level(self: Delegation, spec: Any, **kwargs: Any) -> None:
        configure(self, spec, **kwargs)
        if level["level"] in _METER_OFF:
            self.config["callbacks"] = []
        if level["level"] in _METADATA_OFF:  # the task id stays: the one-level guard reads it
            self.config["metadata"] = {kwargs["metadata_key"]: self.task_id}

    def open_transcript_at_level(self: Delegation, new_sink: Callable[..., Any]) -> None:
        if level["level"] in _RECORDS_OFF:
            self.sink, self.recorder = _NoTranscript(), None
        else:
            open_transcript(self, new_sink)

    def command_at_level(runtime: Any, outcome: Any, writes: Any, stored: Any = ()) -> Command[Any]:
        full = command(runtime, outcome, writes, stored)
        if level["level"] in _RECORDS_OFF and isinstance(full.update, Mapping):
            return Command(update={"messages": full.update["messages"]})
        if level["level"] in _UNCOPIED and isinstance(full.update, Mapping):
            return Command(update=tuple(full.update.items()))
        return full

    def apart_at_level(meter: Any = None) -> Any:  # the meter is also in force through LangChain's configure hook
        return metered_apart(None if level["level"] in _METER_OFF else meter)

    with (mock.patch.object(Delegation, "configure", configure_at_level),
          mock.patch.object(runner, "metered_apart", apart_at_level),
          mock.patch.object(Delegation, "open_transcript", open_transcript_at_level),
          mock.patch.object(delegating, "outcome_command", command_at_level)):
        yield level


Kind = tuple[str, bool]
"""(level, or ``theirs``; delegating run or no-op run)."""


def _kinds() -> list[Kind]:
    return [(who, delegated) for who in (*LEVELS, *(s for s in sides() if s == THEIRS)) for delegated in (True, False)]


def _schedule(kinds: list[Kind], runs: int) -> list[Kind]:
    """Every kind once a round, each round rotated one place, as the overhead measure interleaves."""
    order: list[Kind] = []
    for i in range(runs):
        shift = i % len(kinds)
        order.extend(kinds[shift:] + kinds[:shift])
    return order


def _measure(mode: str, runs: int, warmup: int) -> dict[Kind, list[float]]:
    agents = overhead._agents()
    kinds = _kinds()
    times: dict[Kind, list[float]] = {kind: [] for kind in kinds}
    with _switchable() as level:

        def prepared(kind: Kind) -> tuple[Any, Any]:
            who, delegated = kind
            level["level"] = "shipped" if who == THEIRS else who
            return agents[THEIRS if who == THEIRS else OURS], overhead.DELEGATE if delegated else overhead.BASELINE

        if mode == "invoke":
            for kind in _schedule(kinds, warmup):
                agent, message = prepared(kind)
                overhead._check(agent.invoke(message), kind[1])
            quiet_gc()
            for kind in _schedule(kinds, runs):
                agent, message = prepared(kind)
                cpu, _, state = cpu_and_wall(functools.partial(agent.invoke, message))
                overhead._check(state, kind[1])
                times[kind].append(cpu)
        else:

            async def measure() -> None:
                for kind in _schedule(kinds, warmup):
                    agent, message = prepared(kind)
                    overhead._check(await agent.ainvoke(message), kind[1])
                quiet_gc()
                for kind in _schedule(kinds, runs):
                    agent, message = prepared(kind)
                    cpu, _, state = await acpu_and_wall(functools.partial(agent.ainvoke, message))
                    overhead._check(state, kind[1])
                    times[kind].append(cpu)

            asyncio.run(measure())
    return times


def run(quick: bool = False) -> list[dict[str, Any]]:
    runs, warmup = (3, 1) if quick else (1000, 10)
    records = []
    for mode in ("invoke", "ainvoke"):
        times = _measure(mode, runs, warmup)

        def overhead_ms(who: str, times: dict[Kind, list[float]] = times) -> float:
            return (median(times[(who, True)]) - median(times[(who, False)])) * 1000

        theirs = overhead_ms(THEIRS) if THEIRS in sides() else None
        shipped = overhead_ms("shipped")
        for level in LEVELS:
            ours = overhead_ms(level)
            records.append(record(
                f"{NAME}.{mode}.{level}", unit="ms CPU", ours=ours, theirs=theirs, goal="report", met=None,
                sizes={"runs": runs, "warmup": warmup},
                notes=theirs_note(f"The overhead measure on {mode}, ours at level {level!r} (see bench/knockout.py: "
                                  "each level takes more of the governance off), interleaved with the other "
                                  "levels and with deepagents in one process."),
                detail={"saved_ms_against_shipped": shipped - ours},
            ))
    return records
