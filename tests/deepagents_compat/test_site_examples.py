"""The examples of deepagents' documentation pages, with the import swapped.

Each test is one Python example of the Deep Agents docs (the "Subagents",
"Human-in-the-loop" and "Async subagents" pages, and a few others; their
sources are ``src/oss/deepagents/*.mdx`` in the langchain-ai/docs repository),
as written there, with two changes only: ``from deepagents import ...``
becomes ``from deep_agent import ...``, and each model (the main agent's and a
spec's ``"model"``) is a scripted one, so the example runs offline. Names the
page leaves undefined (``internet_search``, ``web_search``, ...) are small
tools defined here. Each example then runs and checks what the page says it
does. Run on deepagents 0.7.32 with the import swapped back, all pass there
too but the one marked ``xfail`` (which fails there as well) and two whose
checks read this library's own wording: its ``subagent_tasks`` state key, and
the forked child's hand-off message (deepagents prefixes the description).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from helpers.graphs import user
from langchain.agents import create_agent
from langchain.messages import HumanMessage
from langchain.tools import ToolRuntime, tool
from langchain_core.callbacks import BaseCallbackHandler
from langgraph.checkpoint.memory import InMemorySaver, MemorySaver
from langgraph.types import Command, interrupt
from pydantic import BaseModel, Field

from deep_agent import AsyncSubAgent, CompiledSubAgent, create_deep_agent  # swapped: deepagents
from deep_agent._testing import ScriptedChatModel, tool_call

pytest.importorskip("deepagents")

SEEN: list[tuple[str, Any]] = []


@pytest.fixture(autouse=True)
def _clear_seen():
    SEEN.clear()


def internet_search(
    query: str,
    max_results: int = 5,
    topic: Literal["general", "news", "finance"] = "general",
    include_raw_content: bool = False,
):
    """Run a web search"""
    SEEN.append(("internet_search", query))
    return {"results": [f"result for {query}"]}


@tool
def web_search(query: str) -> str:
    """Search the web."""
    SEEN.append(("web_search", query))
    return f"results for {query}"


def parent_delegating(to: str, description: str = "look into it") -> ScriptedChatModel:
    return ScriptedChatModel(
        responses=[{"tool_calls": [tool_call("task", description=description, subagent_type=to)]}, "parent done"],
    )


def child(*replies: Any) -> ScriptedChatModel:
    return ScriptedChatModel(responses=list(replies))


def task_results(out: dict[str, Any]) -> list[str]:
    return [m.text for m in out["messages"] if m.type == "tool" and m.name == "task"]


def test_a_dictionary_subagent_with_its_own_tools_and_model(run):
    research_subagent = {
        "name": "research-agent",
        "description": "Used to research more in depth questions",
        "system_prompt": "You are a great researcher",
        "tools": [internet_search],
        "model": child({"tool_calls": [tool_call("internet_search", query="quantum")]}, "quantum is hard"),  # swapped
    }
    agent = create_deep_agent(
        model=parent_delegating("research-agent"),  # swapped
        subagents=[research_subagent],
    )
    out = run(agent, user("Research quantum computing"))
    assert task_results(out) == ["quantum is hard"]
    assert SEEN == [("internet_search", "quantum")]


def test_a_compiled_subagent_built_with_create_agent(run):
    specialized_tools = [web_search]
    your_model = child("the data says yes")  # swapped
    research_instructions = "You are an expert researcher."

    # Create a custom agent graph (the page passes `prompt=`, which LangChain's
    # create_agent has never taken; its name is `system_prompt`)
    custom_graph = create_agent(
        model=your_model,
        tools=specialized_tools,
        system_prompt="You are a specialized agent for data analysis...",
    )

    # Use it as a custom subagent
    custom_subagent = CompiledSubAgent(
        name="data-analyzer",
        description="Specialized agent for complex data analysis tasks",
        runnable=custom_graph,
    )

    subagents = [custom_subagent]

    agent = create_deep_agent(
        model=parent_delegating("data-analyzer"),  # swapped
        tools=[internet_search],
        system_prompt=research_instructions,
        subagents=subagents,
    )
    out = run(agent, user("analyse it"))
    assert task_results(out) == ["the data says yes"]


class AgentNames(BaseCallbackHandler):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def on_chat_model_start(self, serialized, messages, *, metadata=None, **kwargs):
        self.names.add((metadata or {}).get("lc_agent_name"))


def test_streaming_runs_carry_each_agents_name(run):
    research_subagent = {
        "name": "research-agent",
        "description": "Used to research more in depth questions",
        "system_prompt": "You are a great researcher",
        "tools": [internet_search],
        "model": child("found it"),  # swapped: optional override, defaults to main agent model
    }
    subagents = [research_subagent]

    agent = create_deep_agent(
        model=parent_delegating("research-agent"),  # swapped
        subagents=subagents,
        name="main-agent",
    )
    names = AgentNames()
    run(agent, user("go"), {"callbacks": [names]})
    assert names.names == {"main-agent", "research-agent"}


def test_structured_output_reaches_the_parent_as_json():
    class ResearchFindings(BaseModel):
        """Structured findings from a research task."""

        summary: str = Field(description="Summary of findings")
        confidence: float = Field(description="Confidence score from 0 to 1")
        sources: list[str] = Field(description="List of source URLs")

    research_subagent = {
        "name": "researcher",
        "description": "Researches topics and returns structured findings",
        "system_prompt": "Research the given topic thoroughly. Return your findings.",
        "tools": [web_search],
        "response_format": ResearchFindings,
    }

    model = ScriptedChatModel(  # swapped: the child inherits the main agent's model
        rules=[("Find quantum papers", [{"tool_calls": [tool_call(
            "ResearchFindings", summary="qubits", confidence=0.87, sources=["https://a.example"])]}])],
        responses=[{"tool_calls": [tool_call("task", description="Find quantum papers",
                                             subagent_type="researcher")]}, "parent done"],
    )
    agent = create_deep_agent(
        model=model,
        subagents=[research_subagent],
    )

    async def main():
        return await agent.ainvoke(
            {"messages": [{"role": "user", "content": "Research recent advances in quantum computing"}]}
        )

    result = asyncio.run(main())
    (content,) = task_results(result)
    assert json.loads(content) == {"summary": "qubits", "confidence": 0.87, "sources": ["https://a.example"]}


def test_the_general_purpose_subagent_can_be_replaced(run):
    gpt = child("answered by the replacement")  # swapped
    agent = create_deep_agent(
        model=parent_delegating("general-purpose"),  # swapped
        tools=[internet_search],
        subagents=[
            {
                "name": "general-purpose",
                "description": "General-purpose agent for research and multi-step tasks",
                "system_prompt": "You are a general-purpose assistant.",
                "tools": [internet_search],
                "model": gpt,  # Different model for delegated tasks
            },
        ],
    )
    out = run(agent, user("go"))
    assert task_results(out) == ["answered by the replacement"]
    assert "You are a general-purpose assistant." in gpt.calls[0]["messages"][0].text


def skill(name: str) -> dict[str, Any]:
    text = f"---\nname: {name}\ndescription: the {name} skill\n---\n\nUse {name}.\n"
    stamp = "2026-01-01T00:00:00"
    return {"content": text, "encoding": "utf-8", "created_at": stamp, "modified_at": stamp}


def test_skills_the_main_agent_and_a_subagent_each_get_their_own(run):
    main = ScriptedChatModel(  # swapped
        responses=[{"tool_calls": [tool_call("task", description="research it", subagent_type="researcher"),
                                   tool_call("task", description="general job", subagent_type="general-purpose")]},
                   "parent done"],
        rules=[("research it", ["research done"]), ("general job", ["general done"])],
    )

    # Research subagent with its own skills
    research_subagent = {
        "name": "researcher",
        "description": "Research assistant with specialized skills",
        "system_prompt": "You are a researcher.",
        "tools": [web_search],
        "skills": ["/skills/research/", "/skills/web-search/"],  # Subagent-specific skills
    }

    agent = create_deep_agent(
        model=main,
        skills=["/skills/main/"],  # Main agent and GP subagent get these
        subagents=[research_subagent],  # Gets only /skills/research/ and /skills/web-search/
    )
    files = {
        "/skills/main/planning/SKILL.md": skill("planning"),
        "/skills/research/citing/SKILL.md": skill("citing"),
        "/skills/web-search/querying/SKILL.md": skill("querying"),
    }
    out = run(agent, {**user("go"), "files": files})
    assert sorted(task_results(out)) == ["general done", "research done"]

    def prompt_of(description: str) -> str:
        (call,) = [c for c in main.calls if any(description in m.text for m in c["messages"] if m.type == "human")]
        return call["messages"][0].text

    research, general = prompt_of("research it"), prompt_of("general job")
    assert "citing" in research and "querying" in research and "planning" not in research
    assert "planning" in general and "citing" not in general
    root = main.calls[0]["messages"][0].text
    assert "planning" in root and "citing" not in root


def test_multiple_specialized_subagents(run):
    @tool
    def api_call(endpoint: str) -> str:
        """Call an API."""
        return "api"

    @tool
    def database_query(sql: str) -> str:
        """Query the database."""
        return "rows"

    @tool
    def statistical_analysis(data: str) -> str:
        """Analyse data."""
        return "stats"

    @tool
    def format_document(text: str) -> str:
        """Format a document."""
        return "formatted"

    subagents = [
        {
            "name": "data-collector",
            "description": "Gathers raw data from various sources",
            "system_prompt": "Collect comprehensive data on the topic",
            "tools": [web_search, api_call, database_query],
        },
        {
            "name": "data-analyzer",
            "description": "Analyzes collected data for insights",
            "system_prompt": "Analyze data and extract key insights",
            "tools": [statistical_analysis],
        },
        {
            "name": "report-writer",
            "description": "Writes polished reports from analysis",
            "system_prompt": "Create professional reports from insights",
            "tools": [format_document],
        },
    ]

    model = ScriptedChatModel(  # swapped
        rules=[("collect", ["collected"]), ("analyze", ["analyzed"]), ("write", ["written"])],
        responses=[
            {"tool_calls": [tool_call("task", description="collect", subagent_type="data-collector")]},
            {"tool_calls": [tool_call("task", description="analyze", subagent_type="data-analyzer")]},
            {"tool_calls": [tool_call("task", description="write", subagent_type="report-writer")]},
            "report ready",
        ],
    )
    agent = create_deep_agent(
        model=model,
        system_prompt="You coordinate data analysis and reporting. Use subagents for specialized tasks.",
        subagents=subagents,
    )
    out = run(agent, user("go"))
    assert task_results(out) == ["collected", "analyzed", "written"]
    assert [r["agent_type"] for r in out["subagent_tasks"].values()] == ["data-collector", "data-analyzer",
                                                                         "report-writer"]


@dataclass
class Context:
    user_id: str
    session_id: str

@tool
def get_user_data(query: str, runtime: ToolRuntime[Context]) -> str:
    """Fetch data for the current user."""
    user_id = runtime.context.user_id
    return f"Data for user {user_id}: {query}"


def test_runtime_context_reaches_the_subagents_tools(run):
    research_subagent = {
        "name": "researcher",
        "description": "Conducts research for the current user",
        "system_prompt": "You are a research assistant.",
        "tools": [get_user_data],
    }

    model = ScriptedChatModel(  # swapped
        rules=[("fetch their data", [{"tool_calls": [tool_call("get_user_data", query="activity")]}, "looked up"])],
        responses=[{"tool_calls": [tool_call("task", description="fetch their data", subagent_type="researcher")]},
                   "parent done"],
    )
    agent = create_deep_agent(
        model=model,
        subagents=[research_subagent],
        context_schema=Context,
    )

    # Context flows to the researcher subagent and its tools automatically (the
    # page writes `await agent.invoke(...)`; `invoke` is not awaitable, so both are run)
    result = invoke(run, agent, {"messages": [HumanMessage("Look up my recent activity")]},
                    context=Context(user_id="user-123", session_id="abc"))
    tool_results = [m.text for c in model.calls for m in c["messages"] if m.type == "tool"]
    assert "Data for user user-123: activity" in tool_results
    assert task_results(result) == ["looked up"]


def invoke(run, agent, inputs, **kwargs):
    if run.mode == "sync":
        return agent.invoke(inputs, **kwargs)
    return asyncio.run(agent.ainvoke(inputs, **kwargs))


def test_a_shared_tool_knows_which_subagent_called_it(run):
    @tool
    def shared_lookup(query: str, runtime: ToolRuntime) -> str:
        """Look up information."""
        agent_name = runtime.config.get("metadata", {}).get("lc_agent_name")
        if agent_name == "fact-checker":
            return f"strict: {query}"
        return f"general: {query}"

    model = ScriptedChatModel(  # swapped
        rules=[("check it", [{"tool_calls": [tool_call("shared_lookup", query="claim")]}, "checked"]),
               ("research it", [{"tool_calls": [tool_call("shared_lookup", query="topic")]}, "researched"])],
        responses=[{"tool_calls": [tool_call("task", description="check it", subagent_type="fact-checker"),
                                   tool_call("task", description="research it", subagent_type="researcher")]},
                   "parent done"],
    )
    agent = create_deep_agent(
        model=model,
        subagents=[
            {"name": "fact-checker", "description": "Checks facts", "system_prompt": "Check facts.",
             "tools": [shared_lookup]},
            {"name": "researcher", "description": "Researches", "system_prompt": "Research.",
             "tools": [shared_lookup]},
        ],
    )
    run(agent, user("go"))
    tool_results = {m.text for c in model.calls for m in c["messages"]
                    if m.type == "tool" and m.name == "shared_lookup"}
    assert tool_results == {"strict: claim", "general: topic"}


@pytest.mark.filterwarnings("ignore::langchain_core._api.beta_decorator.LangChainBetaWarning")
def test_the_streaming_pages_subagent_example_reads_each_childs_messages():
    # From the docs' event streaming page (its subagents example), on an agent made as above.
    agent = create_deep_agent(model=ScriptedChatModel(  # swapped
        rules=[("write a haiku", ["waves fold into foam"])],
        responses=[{"tool_calls": [tool_call("task", description="write a haiku", subagent_type="general-purpose")]},
                   "parent done"],
    ))
    printed: list[str] = []

    def print(*values: Any) -> None:  # noqa: A001 - what the example prints, kept to check
        printed.append(" ".join(map(str, values)))

    stream = agent.stream_events(
        {
            "messages": [{"role": "user", "content": "Write me a haiku about the sea"}],
        },
        version="v3",
    )

    subagent_names: list[str] = []
    for subagent in stream.subagents:
        print(subagent.name, subagent.path, subagent.status)

        for message in subagent.messages:
            print(message.text)

        subagent_names.append(subagent.name)

    assert subagent_names == ["general-purpose"]
    assert printed[0].startswith("general-purpose ('tools:") and printed[0].endswith(" started")
    assert printed[1:] == ["waves fold into foam"]


# Other pages of deepagents' documentation.


def read_diff(path: str) -> str:
    """Read a file's diff."""
    return f"diff for {path}"


def test_the_forked_subagents_pages_example_continues_the_parents_conversation():
    comment_writer = {
        "name": "comment-writer",
        "description": "Continues an in-progress PR review and drafts review comments",
        "mode": "fork",
        "tools": [read_diff],
    }

    model = ScriptedChatModel(  # swapped
        rules=[("draft the comments", ["Comment: check for None."])],
        responses=[{"tool_calls": [tool_call("read_diff", path="src/app.py")]},
                   {"tool_calls": [tool_call("task", description="draft the comments",
                                             subagent_type="comment-writer")]},
                   "handed off"],
    )
    agent = create_deep_agent(
        model=model,
        tools=[read_diff],
        subagents=[comment_writer],
    )

    result = agent.invoke(
        {
            "messages": [
                {
                    "role": "user",
                    "content": "Review PR #482 and hand it off to comment-writer to draft comments for the issues found",  # noqa: E501
                }
            ]
        }
    )
    assert task_results(result) == ["Comment: check for None."]
    (child,) = [c for c in model.calls if c["messages"][-1].text == "draft the comments"]
    assert [m.type for m in child["messages"]][:3] == ["human", "ai", "tool"]  # the parent's turn so far
    assert child["messages"][2].text == "diff for src/app.py"


def test_the_readmes_example_takes_the_messages_as_a_string():
    @tool
    def my_custom_tool(query: str) -> str:
        """Look something up."""
        return query

    agent = create_deep_agent(
        model=ScriptedChatModel(default="A summary of LangGraph."),  # swapped
        tools=[my_custom_tool],
        system_prompt="You are a research assistant.",
    )
    result = agent.invoke({"messages": "Research LangGraph and write a summary"})
    assert [(m.type, m.text) for m in result["messages"]] == [
        ("human", "Research LangGraph and write a summary"), ("ai", "A summary of LangGraph.")]


# deepagents' "Human-in-the-loop" page.


@tool
def delete_file(path: str) -> str:
    """Delete a file from the filesystem."""
    return f"Deleted {path}"


@tool
def read_file(path: str) -> str:
    """Read a file from the filesystem."""
    return f"Contents of {path}"


@tool
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email."""
    return f"Sent email to {to}"


def the_hitl_pages_agent(model: ScriptedChatModel, interrupt_on: dict[str, Any] | None = None):
    # Checkpointer is REQUIRED for human-in-the-loop
    checkpointer = MemorySaver()

    agent = create_deep_agent(
        model=model,  # swapped
        tools=[delete_file, read_file, send_email],
        interrupt_on=interrupt_on or {
            "delete_file": True,  # Default: approve, edit, reject
            "read_file": False,   # No interrupts needed
            "send_email": {"allowed_decisions": ["approve", "reject"]},  # No editing
        },
        checkpointer=checkpointer  # Required!
    )
    return agent


def tool_results_of(result: dict[str, Any]) -> list[tuple[str | None, str, str]]:
    return [(m.name, m.text, m.status) for m in result["messages"] if m.type == "tool"]


def test_hitl_a_gated_call_waits_for_approval_then_runs() -> None:
    agent = the_hitl_pages_agent(ScriptedChatModel(  # swapped
        responses=[{"tool_calls": [tool_call("delete_file", path="temp.txt")]}, "Deleted temp.txt for you."]))
    printed: list[str] = []

    def print(*values: Any) -> None:  # noqa: A001 - what the example prints, kept to check
        printed.append(" ".join(map(str, values)))

    # Create config with thread_id for state persistence
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}

    # Invoke the agent
    result = agent.invoke({
        "messages": [{"role": "user", "content": "Delete the file temp.txt"}]
    }, config=config)

    # Check if execution was interrupted
    if result.get("__interrupt__"):
        # Extract interrupt information
        interrupts = result["__interrupt__"][0].value
        action_requests = interrupts["action_requests"]
        review_configs = interrupts["review_configs"]

        # Create a lookup map from tool name to review config
        config_map = {cfg["action_name"]: cfg for cfg in review_configs}

        # Display the pending actions to the user
        for action in action_requests:
            review_config = config_map[action["name"]]
            print(f"Tool: {action['name']}")
            print(f"Arguments: {action['args']}")
            print(f"Allowed decisions: {review_config['allowed_decisions']}")

        # Get user decisions (one per action_request, in order)
        decisions = [
            {"type": "approve"}  # User approved the deletion
        ]

        # Resume execution with decisions
        result = agent.invoke(
            Command(resume={"decisions": decisions}),
            config=config  # Must use the same config!
        )

    # Process final result
    print(result["messages"][-1].content)

    assert printed == ["Tool: delete_file", "Arguments: {'path': 'temp.txt'}",
                       "Allowed decisions: ['approve', 'edit', 'reject', 'respond']", "Deleted temp.txt for you."]
    assert tool_results_of(result) == [("delete_file", "Deleted temp.txt", "success")]


def test_hitl_two_gated_calls_are_decided_in_one_interrupt() -> None:
    agent = the_hitl_pages_agent(ScriptedChatModel(  # swapped
        responses=[{"tool_calls": [tool_call("delete_file", path="temp.txt"),
                                   tool_call("send_email", to="admin@example.com", subject="hi", body="done")]},
                   "Deleted it; the email was not sent."]))

    config = {"configurable": {"thread_id": str(uuid.uuid4())}}

    result = agent.invoke({
        "messages": [{
            "role": "user",
            "content": "Delete temp.txt and send an email to admin@example.com"
        }]
    }, config=config)

    if result.get("__interrupt__"):
        interrupts = result["__interrupt__"][0].value
        action_requests = interrupts["action_requests"]

        # Two tools need approval
        assert len(action_requests) == 2

        # Provide decisions in the same order as action_requests
        decisions = [
            {"type": "approve"},  # First tool: delete_file
            {"type": "reject"}    # Second tool: send_email
        ]

        result = agent.invoke(
            Command(resume={"decisions": decisions}),
            config=config
        )
    outcomes = {name: (text, status) for name, text, status in tool_results_of(result)}
    assert outcomes["delete_file"] == ("Deleted temp.txt", "success")
    assert outcomes["send_email"][1] == "error" and "Sent email" not in outcomes["send_email"][0]
    assert result["messages"][-1].text == "Deleted it; the email was not sent."


def test_hitl_an_edited_call_runs_with_the_humans_arguments() -> None:
    # The page's "Tailor configurations by risk" rules, under which send_email may be edited
    interrupt_on = {
        # High risk: full control (approve, edit, reject)
        "delete_file": {"allowed_decisions": ["approve", "edit", "reject"]},
        "send_email": {"allowed_decisions": ["approve", "edit", "reject"]},

        # Medium risk: no editing allowed
        "write_file": {"allowed_decisions": ["approve", "reject"]},

        # Low risk: no interrupts
        "read_file": False,
        "list_files": False,
    }
    agent = the_hitl_pages_agent(ScriptedChatModel(  # swapped
        responses=[{"tool_calls": [tool_call("send_email", to="everyone@company.com", subject="s", body="b")]},
                   "Sent."]), interrupt_on)
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    result = agent.invoke({"messages": [{"role": "user", "content": "Tell everyone"}]}, config=config)
    printed: list[Any] = []
    print = printed.append  # noqa: A001 - what the example prints, kept to check

    if result.get("__interrupt__"):
        interrupts = result["__interrupt__"][0].value
        action_request = interrupts["action_requests"][0]

        # Original args from the agent
        print(action_request["args"])  # {"to": "everyone@company.com", ...}

        # User decides to edit the recipient
        decisions = [{
            "type": "edit",
            "edited_action": {
                "name": action_request["name"],  # Must include the tool name
                "args": {"to": "team@company.com", "subject": "...", "body": "..."}
            }
        }]

        result = agent.invoke(
            Command(resume={"decisions": decisions}),
            config=config
        )
    assert printed == [{"to": "everyone@company.com", "subject": "s", "body": "b"}]
    ((name, text, status),) = tool_results_of(result)
    assert (name, status) == ("send_email", "success") and text.endswith("Sent email to team@company.com")


def test_hitl_the_decision_types_rules_gate_only_their_tools() -> None:
    interrupt_on = {
        # Sensitive operations: allow all options
        "delete_file": {"allowed_decisions": ["approve", "edit", "reject"]},

        # Moderate risk: approval or rejection only
        "write_file": {"allowed_decisions": ["approve", "reject"]},

        # Must approve (no rejection allowed)
        "critical_operation": {"allowed_decisions": ["approve"]},
    }
    agent = the_hitl_pages_agent(ScriptedChatModel(  # swapped
        responses=[{"tool_calls": [tool_call("read_file", path="a.txt"), tool_call("delete_file", path="a.txt")]},
                   "Read and deleted."]), interrupt_on)
    config = {"configurable": {"thread_id": "my-thread"}}
    paused = agent.invoke({"messages": [{"role": "user", "content": "Read a.txt, then delete it"}]}, config=config)
    (request,) = paused["__interrupt__"][0].value["action_requests"]
    assert request["name"] == "delete_file"
    result = agent.invoke(Command(resume={"decisions": [{"type": "reject"}]}), config=config)
    assert {(name, status) for name, _, status in tool_results_of(result)} == {
        ("read_file", "success"), ("delete_file", "error")}


def test_hitl_a_subagents_own_interrupt_on_gates_its_reads() -> None:
    model = ScriptedChatModel(  # swapped: the page gives no model
        rules=[("read config.txt", [{"tool_calls": [tool_call("read_file", path="config.txt")]}, "It says hi."])],
        responses=[{"tool_calls": [tool_call("read_file", path="notes.txt")]},
                   {"tool_calls": [tool_call("task", description="read config.txt", subagent_type="file-manager")]},
                   "parent done"],
    )
    checkpointer = MemorySaver()
    agent = create_deep_agent(
        model=model,  # swapped
        tools=[delete_file, read_file],
        interrupt_on={
            "delete_file": True,
            "read_file": False,
        },
        subagents=[{
            "name": "file-manager",
            "description": "Manages file operations",
            "system_prompt": "You are a file management assistant.",
            "tools": [delete_file, read_file],
            "interrupt_on": {
                # Override: require approval for reads in this subagent
                "delete_file": True,
                "read_file": True,  # Different from main agent!
            }
        }],
        checkpointer=checkpointer
    )
    config = {"configurable": {"thread_id": "files"}}
    result = agent.invoke({"messages": [{"role": "user", "content": "Read notes.txt, then config.txt"}]}, config)
    # the main agent's own read ran ungated; the subagent's waits
    (request,) = result["__interrupt__"][0].value["action_requests"]
    assert (request["name"], request["args"]) == ("read_file", {"path": "config.txt"})
    result = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert task_results(result) == ["It says hi."]
    child_reads = [m.text for c in model.calls for m in c["messages"] if m.type == "tool" and m.name == "read_file"]
    assert "Contents of config.txt" in child_reads
    assert result["messages"][-1].text == "parent done"


def test_hitl_a_subagents_tool_calling_interrupt_directly() -> None:
    printed: list[str] = []

    def print(*values: Any) -> None:  # noqa: A001 - what the example prints, kept to check
        printed.append(" ".join(map(str, values)))

    @tool(description="Request human approval before proceeding with an action.")
    def request_approval(action_description: str) -> str:
        """Request human approval using the interrupt() primitive."""
        # interrupt() pauses execution and returns the value passed to Command(resume=...)
        approval = interrupt({
            "type": "approval_request",
            "action": action_description,
            "message": f"Please approve or reject: {action_description}",
        })

        if approval.get("approved"):
            return f"Action '{action_description}' was APPROVED. Proceeding..."
        else:
            return f"Action '{action_description}' was REJECTED. Reason: {approval.get('reason', 'No reason provided')}"

    def main() -> None:
        checkpointer = InMemorySaver()
        model = ScriptedChatModel(responses=[  # swapped
            {"tool_calls": [tool_call("request_approval", action_description="deploying to production")]},
            "Approved: deploying to production."])

        compiled_subagent = create_agent(
            model=model,
            tools=[request_approval],
            name="approval-agent",
        )

        parent_agent = create_deep_agent(
            model=parent_delegating("approval-agent", "request approval for 'deploying to production'"),  # swapped
            checkpointer=checkpointer,
            subagents=[
                CompiledSubAgent(
                    name="approval-agent",
                    description="An agent that can request approvals",
                    runnable=compiled_subagent,
                )
            ],
        )

        thread_id = "test_interrupt_directly"
        config = {"configurable": {"thread_id": thread_id}}

        print("Invoking agent - sub-agent will use request_approval tool...")

        result = parent_agent.invoke(
            {
                "messages": [
                    HumanMessage(
                        content="Use the task tool to launch the approval-agent sub-agent. "
                        "Tell it to use the request_approval tool to request approval for 'deploying to production'."
                    )
                ]
            },
            config=config,
        )

        # Check for interrupt
        if result.get("__interrupt__"):
            interrupt_value = result["__interrupt__"][0].value
            print("\nInterrupt received!")
            print(f"  Type: {interrupt_value.get('type')}")
            print(f"  Action: {interrupt_value.get('action')}")
            print(f"  Message: {interrupt_value.get('message')}")

            print("\nResuming with Command(resume={'approved': True})...")
            result2 = parent_agent.invoke(
                Command(resume={"approved": True}),
                config=config,
            )

            if "__interrupt__" not in result2:
                print("\nExecution completed!")
                # Find the tool response
                tool_msgs = [m for m in result2.get("messages", []) if m.type == "tool"]
                if tool_msgs:
                    print(f"  Tool result: {tool_msgs[-1].content}")
            else:
                print("\nAnother interrupt occurred")
        else:
            print("\n  No interrupt - the model may not have called request_approval")

    main()
    assert printed == [
        "Invoking agent - sub-agent will use request_approval tool...",
        "\nInterrupt received!",
        "  Type: approval_request",
        "  Action: deploying to production",
        "  Message: Please approve or reject: deploying to production",
        "\nResuming with Command(resume={'approved': True})...",
        "\nExecution completed!",
        "  Tool result: Approved: deploying to production.",
    ]


# deepagents' "Async subagents" page. Its tasks run on a LangGraph Server
# (co-deployed, no url; or remote, with one): offline, the examples build the
# supervisor and run the turns that need no server.


def test_async_subagents_give_the_supervisor_the_five_task_tools() -> None:
    async_subagents = [
        AsyncSubAgent(
            name="researcher",
            description="Research agent for information gathering and synthesis",
            graph_id="researcher",
            # No url → ASGI transport (co-deployed in the same deployment)
        ),
        AsyncSubAgent(
            name="coder",
            description="Coding agent for code generation and review",
            graph_id="coder",
            # url="https://coder-deployment.langsmith.dev"  # Optional: HTTP transport for remote
        ),
    ]

    model = ScriptedChatModel(  # swapped
        responses=[{"tool_calls": [tool_call("list_async_tasks")]}, "No tasks yet."])
    agent = create_deep_agent(
        model=model,  # swapped
        subagents=async_subagents,
    )
    result = agent.invoke({"messages": [{"role": "user", "content": "What are my tasks?"}]})
    offered = set(model.calls[0]["tools"])
    assert {"start_async_task", "check_async_task", "update_async_task", "cancel_async_task",
            "list_async_tasks"} <= offered
    assert "task" in offered  # the general-purpose subagent stays inline
    ((name, _, status),) = tool_results_of(result)
    assert (name, status) == ("list_async_tasks", "success")


def test_async_subagents_hybrid_specs_and_the_supervisors_own_prompt() -> None:
    async_subagents = [
        AsyncSubAgent(
            name="researcher",
            description="Research agent",
            graph_id="researcher",
            # No url → ASGI (co-deployed)
        ),
        AsyncSubAgent(
            name="coder",
            description="Coding agent",
            graph_id="coder",
            url="https://coder-deployment.langsmith.dev",
            # url present → HTTP (remote)
        ),
    ]
    model = ScriptedChatModel(default="Nothing to launch.")  # swapped
    agent = create_deep_agent(
        model=model,  # swapped
        system_prompt="""...your instructions...

    After launching an async subagent, ALWAYS return control to the user.
    Never call check_async_task immediately after launch.""",
        subagents=async_subagents,
    )
    result = agent.invoke({"messages": [{"role": "user", "content": "hello"}]})
    assert result["messages"][-1].text == "Nothing to launch."
    assert "ALWAYS return control to the user" in model.calls[0]["system"]


@pytest.mark.xfail(raises=ImportError, strict=True,
                   reason="deepagents 0.7.32 (installed) has no CompletionNotifierMiddleware: the page's "
                   "notifier is a later deepagents', so the example fails on deepagents itself")
def test_async_subagents_completion_notifier() -> None:
    from deep_agent import CompletionNotifierMiddleware  # swapped: deepagents

    # Same deployment (ASGI transport):
    notifier = CompletionNotifierMiddleware(parent_graph_id="supervisor")
    subagent = create_agent(
        model=ScriptedChatModel(default="done"),  # swapped
        tools=[web_search],
        middleware=[notifier],
    )
    # Launched without a supervisor, there is no parent_thread_id: the middleware does nothing
    result = subagent.invoke({"messages": [{"role": "user", "content": "go"}]})
    assert result["messages"][-1].text == "done"
