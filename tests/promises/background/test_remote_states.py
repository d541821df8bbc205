"""How a server thread, read in a batch, settles a task -- and when it cannot."""

from __future__ import annotations

from subagents.background._remote import fields_from, fields_from_thread, with_state

AI = {"type": "ai", "content": "All done.", "usage_metadata": {"input_tokens": 7, "output_tokens": 3}}


def test_an_idle_thread_is_a_completed_task_with_its_last_answer_and_usage():
    fields = fields_from_thread({"status": "idle", "values": {"messages": [{"type": "human", "content": "x"}, AI]}})
    assert fields["status"] == "completed" and fields["result"] == "All done."
    assert (fields["model_calls"], fields["input_tokens"], fields["output_tokens"]) == (1, 7, 3)


def test_an_interrupted_thread_waits_for_approval_with_interrupts_and_is_cancelled_without():
    waiting = fields_from_thread({"status": "interrupted", "values": {},
                                  "interrupts": {"t": [{"id": "i1", "value": {"action_requests": []}}]}})
    assert waiting["status"] == "waiting_for_approval" and waiting["approval_request"][0]["id"] == "i1"
    assert fields_from_thread({"status": "interrupted", "values": {}, "interrupts": {}})["status"] == "cancelled"


def test_a_busy_or_failed_thread_is_left_to_a_full_read():
    for status in ("busy", "error", None, "something new"):
        assert fields_from_thread({"status": status, "values": {"messages": [AI]}}) is None


def test_a_run_aegra_ends_interrupted_on_an_interrupt_waits_for_approval_and_a_cancelled_one_is_cancelled():
    """aegra ends a run that stopped on an interrupt ``interrupted`` (not ``success``); it read as cancelled."""
    state = {"values": {"messages": []}, "interrupts": [{"id": "i1", "value": {"action_requests": []}}]}
    waiting = fields_from({"run_id": "r1", "status": "interrupted"}, with_state({"thread_id": "t"}, state))
    assert waiting["status"] == "waiting_for_approval" and waiting["approval_request"][0]["id"] == "i1"
    cancelled = fields_from({"run_id": "r1", "status": "interrupted"},
                            with_state({"thread_id": "t"}, {"values": {"messages": []}, "interrupts": []}))
    assert cancelled["status"] == "cancelled"
