"""A Ray address, checked before `ray.init` joins it. `ray.init` retries for a long time
before it gives up, and its C++ core prints a line a second meanwhile: 20 `gcs_client.cc ...
InvalidAuthToken` lines over 20 s came before the one line that said the cluster wants a token.
`check_ray_address` says in seconds when nothing listens there, or when the cluster's GCS
refuses what this driver would send it (no token, or another one); `not_joined` turns what
`ray.init` raised into one line."""

from __future__ import annotations

import os
import socket

from adapterfleet.config import ConfigError


def check_ray_address(address: str, timeout_s: float = 5.0) -> None:
    """Fail in seconds, with one line, when nothing listens at a Ray address (host:port or
    ray://host:port); `ray.init` itself retries for a long time before it gives up."""
    if address == "auto":
        return
    if address.lower().startswith(("http://", "https://")):
        raise ConfigError(
            f"ray address {address!r}: that is a dashboard's address, where `adapterfleet "
            "submit` sends jobs; to join the cluster give its GCS address host:port (ray start "
            "--head prints it, port 6379 by default) to --address / RAY_ADDRESS, or submit the run"
        )
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(
            f"ray address {address!r}: expected host:port (e.g. 10.0.0.1:6379), ray://host:10001 "
            "or auto"
        )
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as error:
        reason = error.strerror or error
        raise ConfigError(
            f"ray address {address!r}: nothing answers at {host}:{port} ({reason}); "
            "start the cluster (ray start --head) or fix --address / RAY_ADDRESS"
        ) from None
    if "://" not in address and _refused_by_token(hostport, timeout_s):  # ray://: a client server
        raise ConfigError(_token_refused(address))


def _refused_by_token(target: str, timeout_s: float) -> bool:
    """Whether the GCS at `target` refuses, for want of the cluster's token, the first call
    `ray.init` makes (GetClusterId), sent with what Ray's own loader would add (this process's
    token under RAY_AUTH_MODE=token). Any other outcome is left to `ray.init`, which says more."""
    import grpc
    from ray._raylet import AuthenticationTokenLoader
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    channel = grpc.insecure_channel(target)
    try:
        loader = AuthenticationTokenLoader.instance()
        metadata = tuple(loader.get_token_for_http_header().items()) if loader.has_token() else ()
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        request = gcs_service_pb2.GetClusterIdRequest()
        stub.GetClusterId(request, timeout=timeout_s, metadata=metadata)
    except grpc.RpcError as error:
        return error.code() == grpc.StatusCode.UNAUTHENTICATED
    except Exception:  # a token file Ray cannot read, ...: ray.init says what it is
        return False
    finally:
        channel.close()
    return False


def _token_refused(address: str) -> str:
    """One line for a cluster with token authentication that refused this driver."""
    fix = (
        "put the cluster's token in RAY_AUTH_TOKEN or ~/.ray/auth_token"
        if os.environ.get("RAY_AUTH_MODE", "").lower() == "token"
        else "set RAY_AUTH_MODE=token here, with its token in ~/.ray/auth_token or RAY_AUTH_TOKEN"
    )
    return (
        f"ray address {address!r}: the cluster uses token authentication and refused this "
        f"driver (InvalidAuthToken); {fix}"
    )


def not_joined(address: str, error: BaseException) -> str:
    """One line for a cluster that answered at `address` and did not let this driver join."""
    causes, cause = [], error
    while cause is not None:
        causes.append(str(cause))
        cause = cause.__cause__ or cause.__context__
    if any("InvalidAuthToken" in text for text in causes):
        return _token_refused(address)
    first = causes[0].splitlines()[0] if causes[0] else type(error).__name__
    return (
        f"ray address {address!r}: cannot join the Ray cluster there ({first}); give the GCS "
        "address ray start --head printed (port 6379 by default) to --address / RAY_ADDRESS"
    )
