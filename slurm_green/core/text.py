"""Text written by users, made safe to store, log and print.

Slurm hands back job names and comments as the bytes users wrote; the Slurm backend
decodes them with ``surrogateescape`` so that no byte can stop the controller and a
comment written back is the user's own bytes. Lone surrogates cannot be encoded as
UTF-8, though: SQLite, log files and terminals refuse them. ``displayable`` turns
each undecodable byte into a visible ``\\xNN`` escape instead, for every sink that
is not Slurm itself.
"""

from __future__ import annotations


def displayable(text: str) -> str:
    """``text`` with every byte that was not UTF-8 shown as ``\\xNN`` (UTF-8 text unchanged)."""
    if text.isascii():
        return text
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
