"""Scripted models for driving ``deep-agent run`` in a subprocess: ``--model scripted:cli_scripts:NAME``."""

from __future__ import annotations

import time

from deep_agent._testing import ScriptedChatModel, tool_call

FINAL_ANSWER = "Done: one edit applied, one rejected, the survey runs in the background."


def _slow(reply, seconds):
    def later(messages):
        time.sleep(seconds)
        return reply
    return later


def review_team() -> ScriptedChatModel:
    """The root delegates two edits, one unknown agent, one invalid call and a background survey."""
    return ScriptedChatModel(
        rules=[
            # A background task that finishes is announced to the root as a message.
            ("Background task updates", [_slow(FINAL_ANSWER, 0.5)]),
            ("Fix the typo", [{"tool_calls": [tool_call("Edit", file_path="notes.txt",
                                                         old_string="teh", new_string="the")]},
                              "Fixed the typo in notes.txt."]),
            ("Rewrite the notes", [{"tool_calls": [tool_call("Edit", file_path="notes.txt",
                                                              old_string="notes", new_string="NOTES")]},
                                   "The rewrite was rejected; notes.txt is unchanged by me."]),
            ("Survey the notes", [_slow({"tool_calls": [tool_call("Grep", pattern="the", path=".")]}, 1.5),
                                  "Survey: notes.txt mentions the project."]),
        ],
        responses=[
            {"content": "Delegating.", "tool_calls": [
                tool_call("task", description="Fix the typo in notes.txt.", subagent_type="editor"),
                tool_call("task", description="Rewrite the notes in capitals.", subagent_type="editor"),
                tool_call("task", description="Translate the notes.", subagent_type="translator"),
                tool_call("task", description="No agent type given."),
                tool_call("start_async_task", description="Survey the notes for the project name.",
                          subagent_type="surveyor"),
            ]},
            _slow(FINAL_ANSWER, 0.5),
        ],
        latency_s=0.3,
    )


def one_edit() -> ScriptedChatModel:
    """The root asks the editor for one edit (for approval tests without a terminal)."""
    return ScriptedChatModel(
        rules=[("Fix the typo", [{"tool_calls": [tool_call("Edit", file_path="notes.txt",
                                                            old_string="teh", new_string="the")]},
                                 "Fixed the typo in notes.txt."])],
        responses=[{"tool_calls": [tool_call("task", description="Fix the typo in notes.txt.",
                                             subagent_type="editor")]},
                   "Done."],
        default="Done.",
    )


def failing_root() -> ScriptedChatModel:
    """The root's model fails at once (a run that fails)."""
    return ScriptedChatModel(responses=[RuntimeError("upstream model returned HTTP 500")])


HOSTILE_ANSWER = "line one\n\x1b[2J\x1b]0;pwned\x07cleared\rover\u202eline two"


def hostile_child() -> ScriptedChatModel:
    """The child answers with escape sequences: a clear screen, a window title, a carriage return, an override."""
    return ScriptedChatModel(
        rules=[("Report back", [HOSTILE_ANSWER])],
        responses=[{"tool_calls": [tool_call("task", description="Report back.", subagent_type="researcher")]},
                   "Done."],
        default="Done.",
    )


def mcp_calc() -> ScriptedChatModel:
    """The root asks the calculator, whose MCP tool it calls once (for the stderr relay test)."""
    return ScriptedChatModel(
        rules=[("Add 2 and 3", [{"tool_calls": [tool_call("mcp__calc__add", a=2, b=3)]}, "2 + 3 = 5"])],
        responses=[
            {"content": "Delegating.",
             "tool_calls": [tool_call("task", description="Add 2 and 3.", subagent_type="calculator")]},
            "The sum is 5.",
        ],
        latency_s=0.3,
    )


def _bash_then_wait(command: str) -> ScriptedChatModel:
    return ScriptedChatModel(responses=[
        {"content": "Running it.", "tool_calls": [tool_call("Bash", command=command, timeout=120_000)]},
        _slow("Done waiting.", 60),
    ])


def bash_long_command() -> ScriptedChatModel:
    """The root runs a Bash command that marks its start (job.started), then would touch job.late after 5 s."""
    return _bash_then_wait("touch job.started; sleep 5; touch job.late")


def slow_one_edit() -> ScriptedChatModel:
    """As one_edit, with every model call taking 1.5 s: keys typed at launch arrive well before the prompt."""
    model = one_edit()
    model.latency_s = 1.5
    return model


def paced_one_edit() -> ScriptedChatModel:
    """As one_edit, with every model call taking 0.5 s: the editor works about 1 s around its approval."""
    model = one_edit()
    model.latency_s = 0.5
    return model


PADDING = "echo " + "harmless " * 60
HIDDEN_TAIL = "; touch hidden-at-the-end"


def padded_bash() -> ScriptedChatModel:
    """The root runs one Bash command whose dangerous part comes after 500 harmless characters."""
    return ScriptedChatModel(responses=[
        {"tool_calls": [tool_call("Bash", command=PADDING + HIDDEN_TAIL)]},
        "Ran it.",
    ])


LONG_ERROR = ("the upstream model refused the request: " + "this part of the reason matters; " * 12
              + "and this is its very end")


def failing_child() -> ScriptedChatModel:
    """The child's model fails with a long reason (longer than the table and the tree show)."""
    return ScriptedChatModel(
        rules=[("Report back", [RuntimeError(LONG_ERROR)])],
        responses=[{"tool_calls": [tool_call("task", description="Report back.", subagent_type="researcher")]},
                   "The researcher failed."],
        default="Done.",
    )


def delegate_to_each_agent() -> ScriptedChatModel:
    """The root hands one job to each agent a hostile checkout defines; each child runs Bash."""
    names = ["hooked", "mcp", "bypass", "skilled"]
    return ScriptedChatModel(
        rules=[("Do the job", [{"tool_calls": [tool_call("Bash", command="touch bash-ran")]}, "Job done."])],
        responses=[{"tool_calls": [tool_call("task", description=f"Do the job ({name}).", subagent_type=name)
                                   for name in names]},
                   "All delegated."],
    )


def slow_child() -> ScriptedChatModel:
    """The root delegates a survey to the editor; every model call takes 2 s (time to press Ctrl-C in it)."""
    return ScriptedChatModel(
        rules=[("Survey the notes", ["Survey: nothing to fix."])],
        responses=[{"tool_calls": [tool_call("task", description="Survey the notes slowly.",
                                             subagent_type="editor")]}, "Done."],
        default="Done.", latency_s=2.0,
    )


def answer_only() -> ScriptedChatModel:
    """The root answers at once: a run that only shows its start-up notes and an answer."""
    return ScriptedChatModel(responses=["Done."], default="Done.")


def two_edits_and_a_write() -> ScriptedChatModel:
    """The root edits notes.txt twice, then writes a new file (approvals of one tool, then another)."""
    return ScriptedChatModel(responses=[
        {"tool_calls": [tool_call("Edit", file_path="notes.txt", old_string="teh", new_string="the")]},
        {"tool_calls": [tool_call("Edit", file_path="notes.txt", old_string="project", new_string="repository")]},
        {"tool_calls": [tool_call("Write", file_path="new.txt", content="new\n")]},
        "Done.",
    ])


def reads_forever() -> ScriptedChatModel:
    """The root reads notes.txt on every turn and never answers: only a limit ends its run."""
    return ScriptedChatModel(default={"tool_calls": [tool_call("Read", file_path="notes.txt")]})


def three_children() -> ScriptedChatModel:
    """The root delegates one survey (the child reads notes.txt), then two in parallel, then answers.

    Every call takes 0.05 s: a run of three root calls and four child calls, for pressing Ctrl-C at each step
    (:mod:`ctrl_c_points`).
    """
    return ScriptedChatModel(
        rules=[("First survey", [{"tool_calls": [tool_call("Read", file_path="notes.txt")]}, "Survey one."]),
               ("Second survey", ["Survey two."]),
               ("Third survey", ["Survey three."])],
        responses=[{"tool_calls": [tool_call("task", description="First survey of the notes.",
                                             subagent_type="editor")]},
                   {"tool_calls": [tool_call("task", description=f"{which} survey of the notes.",
                                             subagent_type="editor") for which in ("Second", "Third")]},
                   "All three surveys are done."],
        latency_s=0.05,
    )
