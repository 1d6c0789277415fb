"""The ``error`` server event: shapes, codes and messages the local server sends.

Codes and messages follow the real service where they are known (docs/protocol.md §10
and captured sessions). Codes this server names itself, because the service's
own are not documented, are marked *local* below:

=====================================  ====================================================
code                                   when
=====================================  ====================================================
``invalid_json``                       a text frame that is not JSON
``invalid_event``                      binary frame; JSON that is not an object; a binary message on a call's
                                       data channel (*local* wording)
``invalid_value`` (param ``type``)     unknown or beta event type
``missing_required_parameter``         a required field is absent
``unknown_parameter``                  a field the GA schema does not have
``invalid_type``                       a field of the wrong JSON type
``invalid_value``                      a value out of its set; truncate past the audio
``integer_below_min_value`` / ``…above…``  numbers out of range
``invalid_parameter``                  a transcription ``session.update`` on a realtime session
``cannot_update_voice``                voice change after assistant audio
``conversation_already_has_active_response`` / ``response_cancel_not_active``
``input_audio_buffer_commit_empty``    commit of less than 100 ms
``item_truncate_invalid_item_id`` / ``item_delete_invalid_item_id`` / ``item_retrieve_invalid_item_id``
``unsupported_content_type``           truncate of an item without assistant audio
``event_too_large`` (*local*)          a frame above the configured maximum; over a call, an event of the
                                       server's own larger than the peer's data channel takes (not sent),
                                       or a caller's message larger than the server's channel takes (dropped)
``invalid_value`` (param ``audio``)    an append past 15 MiB in one event, or past the input
                                       buffer's cap (*local* wording; the append is refused)
``request_timeout`` (*local*)          HTTP 408: a request or handshake not received whole by the opening deadline
``too_many_calls`` (*local*)           HTTP 503 (``server_error``): a WebRTC offer while the server runs as many
                                       calls as it takes at once (``ServerConfig.max_calls``)
``rate_limit_exceeded`` (*local*       HTTP 429 (``requests``): a client secret minted while as many live keys, or
wording)                               as many bytes of their sessions, as the server keeps are live
``session_expired``, ``beta_api_shape_disabled``, ``invalid_api_key``, ``missing_model``
=====================================  ====================================================

Unknown ``previous_item_id`` and duplicate item ids use ``invalid_value`` with
*local* messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from voxline.realtime.errors import RemoteProtocolError

__all__ = [
    "ErrorSpec",
    "RequestRejected",
    "above_max",
    "active_response",
    "auth_missing",
    "below_min",
    "beta_disabled",
    "binary_channel_message",
    "binary_frame",
    "cancel_not_active",
    "cannot_update_voice",
    "commit_empty",
    "duplicate_header",
    "event_not_delivered",
    "event_too_large",
    "invalid_api_key",
    "invalid_choice",
    "invalid_json",
    "invalid_type",
    "invalid_value",
    "input_buffer_full",
    "item_not_found",
    "missing_model",
    "missing_parameter",
    "not_an_object",
    "server_error",
    "session_expired",
    "request_timeout",
    "too_many_calls",
    "too_many_client_secrets",
    "transcription_on_realtime",
    "truncate_too_long",
    "truncate_unknown_item",
    "truncate_unsupported",
    "unknown_parameter",
]


@dataclass(frozen=True, slots=True)
class ErrorSpec:
    """The ``error`` object of an ``error`` event, minus the client's ``event_id``."""

    message: str
    code: str | None
    param: str | None = None
    type: str = "invalid_request_error"

    def to_event(self, event_id: str, client_event_id: str | None) -> dict[str, Any]:
        """The whole ``error`` server event."""
        error = {
            "type": self.type,
            "code": self.code,
            "message": self.message,
            "param": self.param,
            "event_id": client_event_id,
        }
        return {"type": "error", "event_id": event_id, "error": error}


class RequestRejected(RemoteProtocolError):
    """A client event the server refuses; carries the ``error`` to send back."""

    def __init__(self, spec: ErrorSpec) -> None:
        super().__init__(spec.message)
        self.spec = spec


def _quoted_list(values: Sequence[str]) -> str:
    quoted = [f"'{v}'" for v in values]
    if len(quoted) <= 2:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + ", and " + quoted[-1]


def missing_parameter(path: str) -> ErrorSpec:
    return ErrorSpec(f"Missing required parameter: '{path}'.", "missing_required_parameter", path)


def unknown_parameter(path: str) -> ErrorSpec:
    return ErrorSpec(f"Unknown parameter: '{path}'.", "unknown_parameter", path)


def invalid_type(path: str, expected: str, got: str) -> ErrorSpec:
    message = f"Invalid type for '{path}': expected {expected}, but got {got} instead."
    return ErrorSpec(message, "invalid_type", path)


def invalid_choice(path: str, value: object, choices: Sequence[str]) -> ErrorSpec:
    message = f"Invalid value: '{value}'. Supported values are: {_quoted_list(choices)}."
    return ErrorSpec(message, "invalid_value", path)


def invalid_value(path: str | None, message: str) -> ErrorSpec:
    return ErrorSpec(message, "invalid_value", path)


def below_min(path: str, minimum: float, got: float) -> ErrorSpec:
    message = f"Invalid '{path}': integer below minimum value. Expected a value >= {minimum}, but got {got} instead."
    return ErrorSpec(message, "integer_below_min_value", path)


def above_max(path: str, maximum: float, got: float) -> ErrorSpec:
    message = f"Invalid '{path}': integer above maximum value. Expected a value <= {maximum}, but got {got} instead."
    return ErrorSpec(message, "integer_above_max_value", path)


def input_buffer_full(buffered: int, adding: int, limit: int) -> ErrorSpec:
    message = (
        f"Invalid 'audio': the input audio buffer holds {buffered} bytes and {adding} more would pass its "
        f"maximum of {limit} bytes. Commit or clear the buffer first."
    )
    return ErrorSpec(message, "invalid_value", "audio")


def invalid_json(detail: str) -> ErrorSpec:
    return ErrorSpec(f"Invalid event: failed to parse JSON value. {detail}", "invalid_json")


def not_an_object(got: str) -> ErrorSpec:
    return ErrorSpec(f"Invalid event: expected a JSON object, but got {got} instead.", "invalid_event")


def binary_frame() -> ErrorSpec:
    return ErrorSpec("Expected a text WebSocket message; binary frames are not supported.", "invalid_event")


def binary_channel_message() -> ErrorSpec:
    """*Local* wording: a binary message on a WebRTC call's ``oai-events`` data channel, which carries events as text
    messages; the call goes on."""
    return ErrorSpec("Expected a text message on the data channel; binary messages are not supported.",
                     "invalid_event")


def event_too_large(size: int, limit: int) -> ErrorSpec:
    message = f"Invalid event: the message is {size} bytes, more than the maximum of {limit} bytes."
    return ErrorSpec(message, "event_too_large")


def message_dropped(limit: int) -> ErrorSpec:
    """*Local*: a caller's data channel message larger than this server's ``a=max-message-size``, dropped unread
    (its reassembly stopped at the cap); the call goes on."""
    message = f"Invalid event: a data channel message of more than {limit} bytes (this server's a=max-message-size) was dropped unread."
    return ErrorSpec(message, "event_too_large")


def event_not_delivered(kind: str, size: int, why: str) -> ErrorSpec:
    """*Local*: an event of this server's larger than the call's data channel carries (its peer's
    ``a=max-message-size``), not sent; the call goes on. ``why`` is the channel's own reason."""
    message = f"The server's {kind} event ({size} bytes) was not sent: {why}."
    return ErrorSpec(message, "event_too_large", type="server_error")


def request_timeout() -> ErrorSpec:
    """*Local*: a plain HTTP request or a handshake not received whole within the server's opening deadline."""
    return ErrorSpec("The request was not received whole in time: send its head and body without pausing.",
                     "request_timeout")


def too_many_calls(limit: int) -> ErrorSpec:
    """*Local*: a WebRTC offer with ``limit`` calls already running, the most this server takes at once; its place
    frees when a call ends, so it is a ``server_error`` (HTTP 503), worth a retry."""
    message = f"Too many WebRTC calls at once: this server runs at most {limit}; try again when one ends."
    return ErrorSpec(message, "too_many_calls", type="server_error")


def too_many_client_secrets(keys: int, held: int, retry_s: int) -> ErrorSpec:
    """*Local* wording: a client secret asked for while this server keeps as many live ephemeral keys (``keys``) or
    bytes of their sessions (``held``) as it takes; the next frees its place in ``retry_s`` (the answer's
    ``Retry-After``)."""
    message = (f"Too many live client secrets: this server keeps at most {keys}, holding at most {held} bytes of "
               f"sessions; try again in {retry_s} s, when the next one expires.")
    return ErrorSpec(message, "rate_limit_exceeded", type="requests")


def transcription_on_realtime() -> ErrorSpec:
    message = "Passing a transcription session update event to a realtime session is not allowed."
    return ErrorSpec(message, "invalid_parameter", "session.type")


def cannot_update_voice() -> ErrorSpec:
    return ErrorSpec("Cannot update a conversation's voice if assistant audio is present.", "cannot_update_voice")


def active_response(response_id: str) -> ErrorSpec:
    message = (
        f"Conversation already has an active response in progress: {response_id}. "
        "Wait until the response is finished before creating a new one."
    )
    return ErrorSpec(message, "conversation_already_has_active_response")


def cancel_not_active() -> ErrorSpec:
    return ErrorSpec("Cancellation failed: no active response found", "response_cancel_not_active")


def commit_empty(buffered_ms: float) -> ErrorSpec:
    message = (
        "Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, "
        f"but buffer only has {buffered_ms:.2f}ms of audio."
    )
    return ErrorSpec(message, "input_audio_buffer_commit_empty")


def truncate_too_long(have_ms: int, want_ms: int) -> ErrorSpec:
    message = f"Audio content of {have_ms}ms is already shorter than {want_ms}ms"
    return ErrorSpec(message, "invalid_value", "audio_end_ms")


def truncate_unknown_item(item_id: str) -> ErrorSpec:
    message = f"Error truncating item: the item with id '{item_id}' does not exist."
    return ErrorSpec(message, "item_truncate_invalid_item_id", "item_id")


def truncate_unsupported() -> ErrorSpec:
    return ErrorSpec("Only model output audio messages can be truncated", "unsupported_content_type")


def item_not_found(verb: str, item_id: str) -> ErrorSpec:
    """``verb`` is ``"deleting"`` or ``"retrieving"``."""
    code = {"deleting": "item_delete_invalid_item_id", "retrieving": "item_retrieve_invalid_item_id"}[verb]
    return ErrorSpec(f"Error {verb} item: the item with id '{item_id}' does not exist.", code)


def server_error() -> ErrorSpec:
    """What the service answers when it fails on its side: the request may be retried."""
    return ErrorSpec(
        "The server had an error while processing your request. Sorry about that!", None, type="server_error"
    )


def session_expired(minutes: int) -> ErrorSpec:
    unit = "minute" if minutes == 1 else "minutes"
    return ErrorSpec(f"Your session hit the maximum duration of {minutes} {unit}.", "session_expired")


def beta_disabled() -> ErrorSpec:
    message = "The Realtime Beta API is no longer supported. Please use /v1/realtime for the GA API."
    return ErrorSpec(message, "beta_api_shape_disabled")


def invalid_api_key() -> ErrorSpec:
    """The service's code, in the local server's own words: its key is the one it was started with, not an account's
    (the service's message sends the user to their OpenAI account page)."""
    message = ("Incorrect API key provided: this local server takes only the key it was started with (if any) or "
               "an unexpired ephemeral key it minted.")
    return ErrorSpec(message, "invalid_api_key")


def auth_missing() -> ErrorSpec:
    return ErrorSpec("Missing bearer or basic authentication in header", None)


def duplicate_header(name: str) -> ErrorSpec:
    """A header that must come once came twice or more (e.g. ``Authorization`` from a bearer
    token and from ``user:key@`` in the URL): which one counts is not guessed."""
    return ErrorSpec(f"The {name} header was sent more than once; send it once.", "duplicate_header", name)


def missing_model() -> ErrorSpec:
    message = "You must provide a model parameter, for example wss://api.openai.com/v1/realtime?model=gpt-realtime"
    return ErrorSpec(message, "missing_model")
