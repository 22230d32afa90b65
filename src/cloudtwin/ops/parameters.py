"""Extraction of a message's parameters: the text that a template's ``<*>`` slots stand for."""

from __future__ import annotations

import re
from functools import lru_cache

from cloudtwin.ops.masking import WILDCARD

__all__ = ["extract_parameters"]


@lru_cache(maxsize=4096)
def _template_pattern(template: str) -> re.Pattern[str]:
    pieces = []
    for token in template.split():
        pieces.append("(.*?)".join(re.escape(part) for part in token.split(WILDCARD)))
    return re.compile("^" + r"\s+".join(pieces) + "$", re.DOTALL)


def extract_parameters(template: str, content: str) -> list[str]:
    """The values of the template's variable slots in this message, left to right.

    >>> extract_parameters("Receiving block <*> src: /<*> dest: /<*>",
    ...                    "Receiving block blk_1 src: /10.0.0.1:5 dest: /10.0.0.2:5")
    ['blk_1', '10.0.0.1:5', '10.0.0.2:5']
    >>> extract_parameters("disk <*> full", "no match here")
    []
    """
    if WILDCARD not in template:
        return []
    match = _template_pattern(template).match(content.strip())
    return list(match.groups()) if match else []
