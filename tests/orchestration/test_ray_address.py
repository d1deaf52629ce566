"""`check_ray_address` against real listeners that are not a Ray GCS: `ray.init` waited minutes
on an HTTP server's port, and 20 s on a raylet's, before it said anything."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from adapterfleet.config import ConfigError
from adapterfleet.orchestration.ray_address import check_ray_address


@pytest.fixture
def http_port() -> Iterator[int]:
    """A plain HTTP server on loopback, as a dashboard's port is."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


@pytest.fixture
def grpc_port() -> Iterator[int]:
    """A gRPC server with no services, as a raylet's port is to the GCS's calls."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield port
    server.stop(grace=None)


def test_an_http_server_is_not_taken_for_a_gcs(http_port: int) -> None:
    with pytest.raises(ConfigError) as refused:
        check_ray_address(f"127.0.0.1:{http_port}")
    assert str(refused.value).startswith(
        f"ray address '127.0.0.1:{http_port}': what answers there does not speak gRPC (an HTTP "
        "server, such as a dashboard?), not a Ray cluster's GCS; give the GCS address ray start "
        "--head printed (port 6379 by default)"
    )


def test_a_grpc_server_without_the_gcs_is_not_taken_for_one(grpc_port: int) -> None:
    with pytest.raises(ConfigError, match=r"a gRPC server answers there without the GCS's "):
        check_ray_address(f"127.0.0.1:{grpc_port}")


def test_a_port_nothing_listens_on_is_said() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    with pytest.raises(ConfigError, match=rf"nothing answers at 127.0.0.1:{port} "):
        check_ray_address(f"127.0.0.1:{port}")


def test_a_ray_client_address_is_left_to_ray_init(grpc_port: int) -> None:
    """ray://host:port goes to a Ray Client server, which answers no GCS call: no verdict here."""
    check_ray_address(f"ray://127.0.0.1:{grpc_port}")
