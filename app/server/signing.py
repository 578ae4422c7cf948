"""Callback signatures: `X-Easel-Signature: sha256=<hex HMAC-SHA256 of the raw body>`.

The key is the queue's own (`queue_secret`, made once by the first server that needs it),
not a file of one machine: every server on a shared PostgreSQL queue sends the callbacks
of jobs any of them took, and a receiver must check them all with one secret. Whoever can
read the queue's database can read it; they can change the jobs themselves already. It is
never in settings.json, never in a log; `serve` prints it the once it makes it, and
`serve --show-callback-secret` on demand.
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-Easel-Signature"


def signature(secret: str, body: bytes) -> str:
    """The header's value for `body`: what a receiver computes and compares."""
    return "sha256=" + hmac.new(secret.encode("ascii"), body, hashlib.sha256).hexdigest()
