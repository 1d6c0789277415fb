"""Wires the tool dispatcher to one session's protocol core.

Calls start on ``response.function_call_arguments.done`` only; ``response.done`` tells the
tracker the response is over; outputs and the single follow-up ``response.create`` go
through the protocol core, which queues the create while another response is active.
"""

from __future__ import annotations

from collections.abc import Callable

from voxline.base.clock import Clock
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
        clock: Clock | None = None,
    ) -> None:
        self.registry = registry
        self.tracker = tracker or CallTracker()
        self.runner = ToolRunner(registry, self.tracker, approve, on_event=on_event, clock=clock)

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

    def drain_into(self, protocol: RealtimeProtocol, new_item_id: Callable[[], str] | None = None) -> list[ev.ClientEvent]:
        """Move the tracker's pending outputs and follow-up into the protocol core; returns them.

        ``response.create`` goes through the core's lifecycle rules (queued while another
        response is active); outputs are sent as they are, each given an ``item.id`` by
        ``new_item_id`` (when set) so the session's mirror holds it before the server's echo.
        """
        commands = self.tracker.commands()
        sent: list[ev.ClientEvent] = []
        for command in commands:
            if new_item_id is not None and isinstance(command, ev.ConversationItemCreate) and not command.item.id:
                command = command.model_copy(update={"item": command.item.model_copy(update={"id": new_item_id()})})
            protocol.send(command)
            sent.append(command)
        return sent
