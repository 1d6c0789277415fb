"""Wires the tool dispatcher to one session's protocol core.

Calls start on ``response.function_call_arguments.done`` only; ``response.done`` tells the
tracker the response is over; outputs and the single follow-up ``response.create`` go
through the protocol core, which queues the create while another response is active.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from voxline.realtime import events as ev
from voxline.realtime.protocol import ProtocolOutput, RealtimeProtocol

from .tools import Approver, CallTracker, ToolEvent, ToolRegistry, ToolRunner

__all__ = ["ToolBridge"]


class ToolBridge:
    """One session's view of a (possibly shared) :class:`ToolRegistry`."""

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        approve: Approver | None = None,
        on_event: Callable[[ToolEvent], None] | None = None,
        tracker: CallTracker | None = None,
    ) -> None:
        self.registry = registry
        self.tracker = tracker or CallTracker()
        self.runner = ToolRunner(registry, self.tracker, approve, on_event=on_event)

    def handle(self, output: ProtocolOutput) -> None:
        """Feed one protocol output; starts calls whose arguments are complete."""
        match output:
            case ev.ResponseFunctionCallArgumentsDone():
                calls = self.tracker.on_arguments_done(
                    output.response_id, output.item_id, output.call_id, output.name, output.arguments
                )
                self.runner.submit(calls)
            case ev.ResponseDone():
                self.tracker.on_response_done(output.response.id, output.response.status or "completed")
            case ev.ConversationItemDeleted():
                self.tracker.on_item_deleted(output.item_id)
            case _:
                pass

    def drain_into(self, protocol: RealtimeProtocol) -> int:
        """Move the tracker's pending outputs and follow-up into the protocol core."""
        commands: list[dict[str, Any]] = self.tracker.commands()
        for command in commands:
            match command["type"]:
                case "conversation.item.create":
                    protocol.create_item(command["item"])
                case "response.create":
                    protocol.create_response(command.get("response"))
                case other:
                    raise AssertionError(f"unexpected tool command {other}")
        return len(commands)
