"""GA server events about remote MCP tools; loose models, every unknown key kept."""

from __future__ import annotations

from typing import Literal

from .server import ServerEventBase

__all__ = [
    "McpListToolsCompleted",
    "McpListToolsFailed",
    "McpListToolsInProgress",
    "ResponseMcpCallArgumentsDelta",
    "ResponseMcpCallArgumentsDone",
    "ResponseMcpCallCompleted",
    "ResponseMcpCallFailed",
    "ResponseMcpCallInProgress",
]


class McpListToolsInProgress(ServerEventBase):
    """``mcp_list_tools.in_progress``: listing the tools of an MCP server."""

    type: Literal["mcp_list_tools.in_progress"] = "mcp_list_tools.in_progress"
    item_id: str


class McpListToolsCompleted(ServerEventBase):
    """``mcp_list_tools.completed``."""

    type: Literal["mcp_list_tools.completed"] = "mcp_list_tools.completed"
    item_id: str


class McpListToolsFailed(ServerEventBase):
    """``mcp_list_tools.failed``."""

    type: Literal["mcp_list_tools.failed"] = "mcp_list_tools.failed"
    item_id: str


class _McpCallRef(ServerEventBase):
    """An MCP call event: the item and its place in the response output."""

    item_id: str
    output_index: int


class ResponseMcpCallArgumentsDelta(_McpCallRef):
    """``response.mcp_call_arguments.delta``."""

    type: Literal["response.mcp_call_arguments.delta"] = "response.mcp_call_arguments.delta"
    response_id: str
    delta: str


class ResponseMcpCallArgumentsDone(_McpCallRef):
    """``response.mcp_call_arguments.done``."""

    type: Literal["response.mcp_call_arguments.done"] = "response.mcp_call_arguments.done"
    response_id: str
    arguments: str


class ResponseMcpCallInProgress(_McpCallRef):
    """``response.mcp_call.in_progress``."""

    type: Literal["response.mcp_call.in_progress"] = "response.mcp_call.in_progress"


class ResponseMcpCallCompleted(_McpCallRef):
    """``response.mcp_call.completed``."""

    type: Literal["response.mcp_call.completed"] = "response.mcp_call.completed"


class ResponseMcpCallFailed(_McpCallRef):
    """``response.mcp_call.failed``."""

    type: Literal["response.mcp_call.failed"] = "response.mcp_call.failed"
