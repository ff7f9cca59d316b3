"""Text written by users, made safe to store, log and print.

Slurm hands back job names and comments as the bytes users wrote; the Slurm backend
decodes them with ``surrogateescape`` so that no byte can stop the controller and a
comment written back is the user's own bytes. Lone surrogates cannot be encoded as
UTF-8, though: SQLite, log files and terminals refuse them. ``displayable`` turns
each undecodable byte into a visible ``\\xNN`` escape instead, for every sink that
is not Slurm itself.

Stored text keeps the user's newlines and control characters (the JSON outputs carry
them escaped). A line printed for a person must not: ``terminal_safe`` escapes them, so
that a job name cannot forge output lines or send escape sequences to the reader's
terminal, and rich is given the result as literal ``Text``, never as markup.
"""

from __future__ import annotations

import re

#: C0 controls, DEL, C1 controls, the Unicode line and paragraph separators, and the bidi
#: embeddings, overrides and isolates (U+202E shows a name, and what follows it on the line,
#: reversed: "Trojan Source").
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def displayable(text: str) -> str:
    """``text`` with every byte that was not UTF-8 shown as ``\\xNN`` (UTF-8 text unchanged)."""
    if text.isascii():
        return text
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def terminal_safe(text: str) -> str:
    """``text`` as one inert line for a terminal: ``displayable``, and every control character
    (C0, DEL, C1, U+2028/U+2029, bidi overrides) shown as an escape (``\\n``, ``\\x1b``) instead of acting.

    For every piece of untrusted text (job names, users, reasons, Slurm's free text) in the
    CLI's text output: a raw newline would forge whole output lines, and ESC/CSI/OSC sequences
    would retitle, clear or hide the reader's terminal.
    """
    return _UNPRINTABLE.sub(_escape, displayable(text))


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) <= 0xFF else f"\\u{ord(char):04x}")
