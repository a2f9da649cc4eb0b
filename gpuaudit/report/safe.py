"""Make untrusted text from the cluster harmless in a terminal."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal(text: str, limit: int = 200) -> str:
    """Control characters (ANSI escapes, newlines, bidi overrides) shown as visible escapes,
    and very long text cut with an ellipsis. Use with `rich.text.Text`, never markup."""
    out = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    if len(out) > limit:
        out = out[: limit - 1] + "…"
    return out
