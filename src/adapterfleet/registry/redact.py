"""Redaction of secrets from params and tags before they reach MLflow (`masking.is_secret`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adapterfleet.masking import MASK, is_secret

REDACTED = MASK

__all__ = ["REDACTED", "is_secret", "redact"]


def redact_values(values: Mapping[str, Any] | None) -> dict[str, Any]:
    """Copy of `values` with secret-looking entries replaced by `***`, the others as they are
    (numbers stay numbers in a JSON tag)."""
    return {str(k): REDACTED if is_secret(str(k), v) else v for k, v in (values or {}).items()}


def redact(values: Mapping[str, Any] | None) -> dict[str, str]:
    """Stringified copy of `values` with secret-looking entries replaced by `***`."""
    out: dict[str, str] = {}
    for key, value in (values or {}).items():
        key = str(key)
        out[key] = REDACTED if is_secret(key, value) else str(value)
    return out
