"""A reply cut at the token limit is asked for once more, when the caller opts in, and the record says so.

Without ``retry_truncated`` a cut reply ends its task ``truncated`` with the
partial answer (tests/promises/limits_and_budgets). With it, the child's
model call is made once more: with twice the limit it hit, with a request
to be brief, or both; both calls are counted, and ``truncated_retries``
says a reply was retried.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage
from pydantic import Field

from helpers.graphs import parent_script, records, user
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel
from subagents import SpecError, SubagentSpec
from subagents._outcome import TRUNCATED_RETRY_KEY
from subagents._truncation import BRIEF_PROMPT
from subagents._settings import DelegationSettings

CUT = AIMessage("The first half of the rep", response_metadata={"finish_reason": "length"})
WHOLE = "The whole report, briefly."


class Capped(ScriptedChatModel):
    """A server that cuts every reply at 16 tokens unless asked for more; keeps each call's ``max_tokens``."""

    max_tokens: int = 16
    asked: list[Any] = Field(default_factory=list)

    def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        if "task" not in {t["function"]["name"] for t in kwargs.get("tools") or ()}:  # a child's call
            self.asked.append(kwargs.get("max_tokens"))
            if (kwargs.get("max_tokens") or 0) > 16:
                return self._answer(WHOLE)
        return super()._generate(messages, stop, run_manager, **kwargs)

    async def _agenerate(self, messages: list[Any], stop: Any = None, run_manager: Any = None,
                         **kwargs: Any) -> Any:
        return self._generate(messages, stop, run_manager, **kwargs)

    def _answer(self, text: str) -> Any:
        from langchain_core.outputs import ChatGeneration, ChatResult

        return ChatResult(generations=[ChatGeneration(message=AIMessage(text, usage_metadata={
            "input_tokens": 20, "output_tokens": 8, "total_tokens": 28}))])


def _model(**options: Any) -> Capped:
    return Capped(rules=[("report", [CUT]), (BRIEF_PROMPT, [WHOLE])],
                  responses=parent_script(("write the report", "general-purpose")), **options)


def test_without_the_option_a_cut_reply_is_kept_and_asked_for_once(run):
    model = _model()
    (record,) = records(run(create_deep_agent(model), user("go")))
    assert (record["stop_reason"], record["result"], record["truncated_retries"]) == \
        ("truncated", CUT.text, 0)
    assert model.asked == [None]


def test_more_tokens_asks_again_with_twice_the_limit_and_counts_both_calls(run):
    """Before: the cut reply was the answer (``truncated``), one model call."""
    model = _model()
    out = run(create_deep_agent(model, settings=DelegationSettings.of(retry_truncated="more_tokens")), user("go"))
    (record,) = records(out)
    assert (record["status"], record["stop_reason"], record["result"]) == ("completed", "completed", WHOLE)
    assert model.asked == [None, 32]  # the model's 16, doubled
    assert record["truncated_retries"] == 1 and record["model_calls"] == 2
    assert record["output_tokens"] == 7 + 8  # the cut call's (the scripted model's count) and the retry's


def test_brief_asks_again_with_one_more_message_for_that_call_only(run):
    model = _model()
    out = run(create_deep_agent(model, settings=DelegationSettings.of(retry_truncated="brief")), user("go"))
    (record,) = records(out)
    assert (record["stop_reason"], record["result"], record["truncated_retries"], record["model_calls"]) == \
        ("completed", WHOLE, 1, 2)
    assert model.asked == [None, None]
    retried = model.calls[-2]["messages"]  # the child's second call, before the parent's last one
    assert retried[-1].text == BRIEF_PROMPT


def test_a_spec_sets_its_own_and_a_retry_that_is_cut_again_stays_truncated(run):
    """A spec's ``retry_truncated=False`` wins over the caller's; another spec's own ``"brief"`` applies."""
    stubborn = ScriptedChatModel(rules=[("report", [CUT]), (BRIEF_PROMPT, [CUT])],
                                 responses=parent_script(("write the report", "writer"),
                                                         ("report again", "plain")))
    specs = [SubagentSpec(name="writer", description="Writes.", retry_truncated="brief"),
             SubagentSpec(name="plain", description="Writes plainly.", retry_truncated=False)]
    out = run(create_deep_agent(stubborn, subagents=specs, settings=DelegationSettings.of(retry_truncated=True)), user("go"))
    by_agent = {r["agent_type"]: r for r in records(out)}
    writer, plain = by_agent["writer"], by_agent["plain"]
    assert (writer["stop_reason"], writer["truncated_retries"], writer["model_calls"]) == ("truncated", 1, 2)
    assert (plain["stop_reason"], plain["truncated_retries"], plain["model_calls"]) == ("truncated", 0, 1)


def test_a_retry_that_fails_keeps_the_cut_reply_marked_with_the_error(run):
    model = ScriptedChatModel(rules=[("report", [CUT]), (BRIEF_PROMPT, [ConnectionError("server went away")])],
                              responses=parent_script(("write the report", "general-purpose")))
    (record,) = records(run(create_deep_agent(model, settings=DelegationSettings.of(retry_truncated="brief")), user("go")))
    assert (record["status"], record["stop_reason"], record["result"]) == ("completed", "truncated", CUT.text)
    assert record["truncated_retries"] == 1 and record["model_calls"] == 2


def test_the_kept_reply_says_what_the_retry_asked_for():
    from langchain.agents import create_agent

    from subagents._truncation import RetryTruncated

    child = _model()
    out = create_agent(child, [], middleware=[RetryTruncated()]).invoke(user("write the report"))
    reply = out["messages"][-1]
    assert reply.text == WHOLE and reply.response_metadata[TRUNCATED_RETRY_KEY] == {"max_tokens": 32, "brief": True}


@pytest.mark.parametrize("bad", ["yes", 1, "longer"])
def test_a_bad_setting_is_refused_naming_the_argument(bad):
    with pytest.raises(SpecError, match="retry_truncated"):
        create_deep_agent(ScriptedChatModel(), settings=DelegationSettings.of(retry_truncated=bad))


def test_an_agent_file_sets_it_and_a_bad_value_names_the_file_and_field(tmp_path):
    from subagents import load_agent_file
    from subagents._errors import AgentFileError

    good = tmp_path / "writer.md"
    good.write_text("---\nname: writer\ndescription: Writes.\nretryTruncated: brief\n---\nWrite.\n")
    assert load_agent_file(good).retry_truncated == "brief"
    bad = tmp_path / "bad.md"
    bad.write_text("---\nname: bad\ndescription: Writes.\nretry_truncated: longer\n---\nWrite.\n")
    with pytest.raises(AgentFileError, match=r"bad\.md.*retry_truncated.*true, false, brief or more_tokens"):
        load_agent_file(bad)
