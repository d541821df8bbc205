"""A chat model with no async code of its own, whose first call outlasts a child's ``timeout_s``.

LangChain runs such a model's calls on a thread under ``ainvoke``: a cancelled
child stops waiting, the thread does not. :data:`STATE` counts the calls
running at once (``peak``) and made (``calls``); a test resets it first::

    STATE.update(running=0, peak=0, calls=0)
"""

from __future__ import annotations

import threading
import time

from langchain_core.language_models import BaseChatModel

from deep_agent._testing import ScriptedChatModel


class SyncOnlyModel(ScriptedChatModel):
    """A chat model with no async code of its own: LangChain runs its calls on a thread under ``ainvoke``.

    Its first call blocks (a slow provider) well past the child's ``timeout_s``; every call reports
    10,000 input tokens, so what an abandoned call spent is plain in the budget.
    """

    _agenerate = BaseChatModel._agenerate  # type: ignore[assignment]

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
        with LOCK:
            STATE["running"] += 1
            STATE["peak"] = max(STATE["peak"], STATE["running"])
            first = STATE["calls"] == 0
            STATE["calls"] += 1
        try:
            if first:
                time.sleep(2.0)
            result = super()._generate(messages, stop, run_manager, **kwargs)
        finally:
            with LOCK:
                STATE["running"] -= 1
        message = result.generations[0].message
        message.usage_metadata = {"input_tokens": 10_000, "output_tokens": 1, "total_tokens": 10_001}
        return result


LOCK = threading.Lock()
STATE: dict[str, int] = {}


def wait_until_idle(timeout_s: float = 60.0) -> None:
    """Wait until no call counted in :data:`STATE` still runs on a thread (bounded): a call a test abandoned
    must not end inside the next test, after that test reset the counts."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and STATE.get("running", 0) > 0:
        time.sleep(0.05)
