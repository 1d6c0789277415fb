"""The tool dispatcher: registered tools, per-session call bookkeeping, and the runner.

* :class:`ToolRegistry` (:mod:`.registry`): tools from type hints or a pydantic model,
  GA flat tool schemas for ``voxline.session.tools``; one registry can serve many sessions.
* :class:`CallTracker` (:mod:`.calls`): sans-I/O, one per session; turns
  ``response.function_call_arguments.done`` / ``response.done`` and results into the
  ``conversation.item.create`` + ``response.create`` events to send, exactly once each,
  across reconnects.
* :class:`ToolRunner` (:mod:`.runner`): runs calls with validation, approval, ordering
  and timeouts, reporting :class:`ToolStarted` / :class:`ToolFinished`.
* :class:`ToolThreads` (:mod:`.threads`): the bounded worker threads of blocking tools,
  apart from the event loop's default executor; a thread idle for ``idle_s`` ends.
* :func:`~.names.chosen_tools` (:mod:`.names`): the names an app offers in an update, checked once
  (sans-I/O, for both session machines).
"""

from __future__ import annotations

from .calls import CallState, CallTracker, ToolCall
from .outputs import encode_output, error_output
from .registry import Failed, Tool, ToolRegistry, Unencodable
from .runner import Approver, ToolEvent, ToolFinished, ToolRunner, ToolStarted
from .threads import ToolThreads

__all__ = [
    "Approver",
    "CallState",
    "CallTracker",
    "Failed",
    "Tool",
    "ToolCall",
    "ToolEvent",
    "ToolFinished",
    "ToolRegistry",
    "ToolRunner",
    "ToolStarted",
    "ToolThreads",
    "Unencodable",
    "encode_output",
    "error_output",
]
