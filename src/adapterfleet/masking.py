"""Where secrets are kept out of what is printed, logged and stored: one place for every layer.

- `mask`: any text with the `user:password@` of every URI in it replaced (`http://***@host`).
- `split_login`: a URI's `user:password@` taken out, for MLflow's environment variables.
- `is_secret` / `masked_setting`: a `key=value` whose key names a secret (token, password, ...)
  or whose value carries a login, shown as `key=***`.

The CLI masks every error line it prints; the registry redacts params and tags with `is_secret`;
the pipeline stores its `--set` overrides and command line through `masked_setting` / `mask`.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable
from typing import Any

MASK = "***"

# scheme://userinfo@ : everything between "//" and the last "@" before the host part.
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
_SECRET_KEY = re.compile(
    r"(token|passw(or)?d|passwd|pwd|secret|api[_.-]?key|apikey|credential|private[_.-]?key"
    r"|access[_.-]?key|auth(orization)?$|bearer|cookie|session[_.-]?key)",
    re.IGNORECASE,
)


def mask(text: str) -> str:
    """`text` with the login part of every URI in it replaced by `***`."""
    return _USERINFO.sub(rf"\g<scheme>{MASK}@", text)


def has_login(text: str) -> bool:
    """True when a URI in `text` carries a `user@` or `user:password@` part."""
    return bool(_USERINFO.search(str(text)))


def split_login(uri: str) -> tuple[str, str | None, str | None]:
    """(`uri` without its login, user, password); user and password are None when absent and
    percent-decoded otherwise (`p%40ss` is `p@ss`)."""
    parts = urllib.parse.urlsplit(uri)
    if "@" not in parts.netloc:
        return uri, None, None
    login, _, host = parts.netloc.rpartition("@")
    user, sep, password = login.partition(":")
    clean = urllib.parse.urlunsplit(parts._replace(netloc=host))
    decoded = urllib.parse.unquote(password) if sep else None
    return clean, urllib.parse.unquote(user) or None, decoded


def is_secret(key: str, value: Any) -> bool:
    """True when `key` names a secret or `value` carries a login in a URI."""
    return bool(_SECRET_KEY.search(str(key))) or has_login(str(value))


def masked_setting(item: str) -> str:
    """A `key=value` override as it may be shown or stored: `key=***` when the key names a
    secret, the URI's login masked (`tracking_uri=http://***@host`) when the value has one."""
    key, sep, value = item.partition("=")
    if sep and _SECRET_KEY.search(key.rsplit(".", 1)[-1]):
        return f"{key}={MASK}"
    return mask(item)


def masked_settings(items: Iterable[str]) -> list[str]:
    return [masked_setting(item) for item in items]
