"""Redaction of secrets from params and tags before they reach MLflow."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

REDACTED = "***"

_SECRET_KEY = re.compile(
    r"(token|passw(or)?d|passwd|pwd|secret|api[_.-]?key|apikey|credential|private[_.-]?key"
    r"|access[_.-]?key|auth(orization)?$|bearer|cookie|session[_.-]?key)",
    re.IGNORECASE,
)
_URI_CREDENTIAL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*:[^/@\s]*@")


def is_secret(key: str, value: Any) -> bool:
    """True when the key names a secret or the value carries `user:pass@` in a URI."""
    return bool(_SECRET_KEY.search(key)) or bool(_URI_CREDENTIAL.search(str(value)))


def redact(values: Mapping[str, Any] | None) -> dict[str, str]:
    """Stringified copy of `values` with secret-looking entries replaced by `***`."""
    out: dict[str, str] = {}
    for key, value in (values or {}).items():
        key = str(key)
        out[key] = REDACTED if is_secret(key, value) else str(value)
    return out
