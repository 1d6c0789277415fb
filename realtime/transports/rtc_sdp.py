"""What aiortc raises for a session description (an offer or an answer) it cannot apply.

aiortc checks little of the SDP it is given: its parser asserts, indexes and unpacks unchecked on
malformed lines, and applying lines that refer to what is not there fails further in (a BUNDLE
naming no m-line's mid leaves a transport unset; a format line for a payload type the m-line does
not list ends a codec search with StopIteration, which leaves the coroutine as a RuntimeError; a
video section without a codec it knows fails as OperationError). Both ends catch
:data:`SDP_FAILURES` around applying a description and report it as the peer's bad SDP.
"""

from __future__ import annotations

from aiortc.exceptions import InvalidAccessError, InvalidStateError, OperationError

__all__ = ["SDP_FAILURES"]

SDP_FAILURES = (ValueError, AssertionError, IndexError, KeyError, TypeError, AttributeError, RuntimeError,
                InvalidAccessError, InvalidStateError, OperationError)
