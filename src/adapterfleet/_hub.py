"""Whether the Hugging Face hub can be reached from this machine. Where its host name does not
resolve (no network), hub ids, models and datasets alike, load from the Hugging Face cache
alone, as with HF_HUB_OFFLINE=1: huggingface_hub would otherwise retry each file five times
(~25 s, a `Retrying in 8s` line each) before it gave up or looked there."""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import sys
from collections.abc import Iterator
from urllib.parse import urlparse

DEFAULT_ENDPOINT = "https://huggingface.co"
TRUE = ("1", "ON", "YES", "TRUE")  # huggingface_hub's spelling of a true flag


@functools.cache
def hub_unreachable() -> str | None:
    """Why the hub (HF_ENDPOINT) cannot be reached, or None: also with HF_HUB_OFFLINE set, where
    the libraries look in the cache alone themselves, at once."""
    if os.environ.get("HF_HUB_OFFLINE", "").upper() in TRUE:
        return None
    endpoint = os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT
    host = urlparse(endpoint).hostname or endpoint
    try:
        socket.getaddrinfo(host, 443)
    except OSError:
        return f"{host} does not resolve (no network?)"
    return None


@contextlib.contextmanager
def cache_only_while_unreachable() -> Iterator[None]:
    """Within the block, huggingface_hub and datasets (where imported) look in their caches
    alone if the hub is unreachable, as HF_HUB_OFFLINE=1 would have made them from the start."""
    if hub_unreachable() is None:
        yield
        return
    flags = [sys.modules.get(name) for name in ("huggingface_hub.constants", "datasets.config")]
    flags = [module for module in flags if module is not None]
    before = [module.HF_HUB_OFFLINE for module in flags]
    for module in flags:
        module.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        for module, value in zip(flags, before, strict=True):
            module.HF_HUB_OFFLINE = value
