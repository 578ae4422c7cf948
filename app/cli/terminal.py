"""Text from the database made safe to print: a prompt is the user's (or a script's) data.

A prompt holding terminal escape codes (`\x1b[2J`, a title change, a hyperlink) would act on
the reader's terminal when `jobs` prints it; a newline would break a one-line listing, and a
right-to-left override would disguise what follows. They are printed escaped, as Python
writes them (`\x1b`, `\n`, `\u202e`), so the line shows exactly what is stored.
"""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, and the bidirectional overrides and isolates.
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: object) -> str:
    """`text` with every control character escaped; everything else as it is."""
    return _UNPRINTABLE.sub(_escaped, str(text))


def _escaped(match: re.Match[str]) -> str:
    return match[0].encode("unicode_escape").decode("ascii")
