"""``max_output_tokens``: cut a scripted reply to fit, as the service ends a response ``incomplete``.

Costs use the estimates of :mod:`voxline.realtime.server.engine.usage` (text: 4 characters per
token; output audio: 20 tokens per second). A message that does not fit is cut
to the words that do (and spoken again); later outputs are dropped. The response
then ends ``incomplete`` with reason ``max_output_tokens``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from voxline.realtime.server.engine.output_items import split_words
from voxline.realtime.server.engine.scenario import Call, Output, Say
from voxline.realtime.server.engine.usage import text_tokens

__all__ = ["fit_budget"]


def fit_budget(outputs: Sequence[Output], budget: int, cost: Callable[[str], int]) -> tuple[list[Output], bool]:
    """Outputs within ``budget`` tokens (``cost`` prices a message text) and whether anything was cut."""
    kept: list[Output] = []
    remaining = budget
    for output in outputs:
        if isinstance(output, Call):
            price = text_tokens(output.arguments)
            if price > remaining:
                return kept, True
            kept.append(output)
            remaining -= price
            continue
        price = cost(output.text)
        if price <= remaining:
            kept.append(output)
            remaining -= price
            continue
        words = split_words(output.text)
        count = len(words) * remaining // max(1, price)
        while count > 0 and cost("".join(words[:count]).rstrip()) > remaining:
            count -= 1
        if count > 0:
            kept.append(Say("".join(words[:count]).rstrip()))
        return kept, True
    return kept, False
