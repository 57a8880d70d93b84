"""Counted nouns in messages: ``1 rank``, ``2 ranks``, ``1 number``."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``"1 point"``, ``"3 points"``: ``n`` and the noun in the number ``n`` asks for.

    Parameters
    ----------
    n
        The count.
    noun
        The singular noun.
    plural
        The plural where it is not ``noun + "s"``.
    """
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
