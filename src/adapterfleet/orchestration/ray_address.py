"""A Ray address, checked before `ray.init` joins it. `ray.init` retries for a long time
before it gives up, and its C++ core prints a line a second meanwhile: 20 `gcs_client.cc ...
InvalidAuthToken` lines over 20 s came before the one line that said the cluster wants a token.
`check_ray_address` says in seconds when nothing listens there, when what listens is not a
Ray GCS (`ray.init` waited minutes on an HTTP server, 20 s on a raylet's port), or when the
cluster's GCS refuses what this driver would send it (no token, or another one); `not_joined`
turns what `ray.init` raised into one line."""

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
    if "://" in address:  # ray://: a Ray Client server, which ray.init checks itself
        return
    answer = _gcs_answer(hostport, timeout_s)
    if answer == "token refused":
        raise ConfigError(_token_refused(address))
    if answer in _NOT_A_GCS:
        raise ConfigError(
            f"ray address {address!r}: {_NOT_A_GCS[answer]}, not a Ray cluster's GCS; give the "
            "GCS address ray start --head printed (port 6379 by default) to --address / "
            "RAY_ADDRESS"
        )


_NOT_A_GCS = {
    "not grpc": "what answers there does not speak gRPC (an HTTP server, such as a dashboard?)",
    "no gcs service": (
        "a gRPC server answers there without the GCS's services (a raylet's port, or a Ray "
        "Client server: give one as ray://host:port)"
    ),
}


def _gcs_answer(target: str, timeout_s: float) -> str | None:
    """How the server at `target` answers the first call `ray.init` makes (GetClusterId), sent
    with what Ray's own loader would add (this process's token under RAY_AUTH_MODE=token):
    "token refused", "not grpc", "no gcs service", or None for a GCS that answered and for any
    other outcome (a slow reply, ...), which is left to `ray.init`."""
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
        code, details = error.code(), str(error.details() or "")
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return "token refused"
        if code == grpc.StatusCode.UNIMPLEMENTED:
            return "no gcs service"
        if code == grpc.StatusCode.UNAVAILABLE and "Failed parsing HTTP/2" in details:
            return "not grpc"
        return None
    except Exception:  # a token file Ray cannot read, ...: ray.init says what it is
        return None
    finally:
        channel.close()
    return None


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
