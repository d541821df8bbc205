"""One callback handler per child: the meter, feeding the transcript recorder first.

A child whose transcript is collected while it runs needs both a
:class:`~subagents._meter.TaskMeter` and a
:class:`~subagents._recorder.TranscriptRecorder`. LangChain dispatches every
event of the child's run to every handler, so two handlers cost twice the
dispatch on the delegation hot path; :class:`RecordingMeter` is the meter
with the recorder inside it. The order is the one two handlers had: the
recorder sees each model event before the meter counts it (and perhaps
stops the child), and a recorder that fails costs the transcript a message,
never the child its run, as with a handler whose ``raise_error`` is off.

Example::

    meter = RecordingMeter(TranscriptRecorder(sink), max_turns=8)
    graph.invoke(inputs, {"callbacks": [meter]})
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.outputs import LLMResult

from subagents._meter import TaskMeter
from subagents._recorder import TranscriptRecorder

log = logging.getLogger(__name__)


class RecordingMeter(TaskMeter):
    """A :class:`TaskMeter` that first hands each model event to ``recorder``."""

    def __init__(self, recorder: TranscriptRecorder, **limits: Any) -> None:
        super().__init__(**limits)
        self.recorder = recorder
        """Fed each model event first; see :class:`~subagents._recorder.TranscriptRecorder`."""

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any = None,
                            **kwargs: Any) -> None:
        try:  # the recorder reads no keyword but run_id: the others are not passed on (hot path)
            self.recorder.on_chat_model_start(serialized, messages, run_id=run_id)
        except Exception as exc:  # noqa: BLE001 - the transcript's loss, not the child's
            log.warning("transcript recorder failed on a model call: %r", exc)
        self._start_call(run_id, messages, kwargs)

    def on_llm_end(self, response: LLMResult, *, run_id: Any = None, **kwargs: Any) -> None:
        try:
            self.recorder.on_llm_end(response, run_id=run_id)
        except Exception as exc:  # noqa: BLE001 - the transcript's loss, not the child's
            log.warning("transcript recorder failed on a model answer: %r", exc)
        self._end_call(run_id, response)
