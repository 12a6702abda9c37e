"""The local endpoint as an HTTP server: bursts of clients and malformed framing answered as HTTP/1.1 expects.

The endpoint behind it is a stand-in that echoes the body, so these tests are about HTTP only (the real
handler is served in test_serve.py).
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from model_servers import serving

from hfpipe.local.serving.serve import MAX_BODY_BYTES, ModelServer


class Echo:
    """An endpoint that answers with the body it was given."""

    def invoke(self, body: bytes, content_type: str, accept: str) -> bytes:
        return b'{"echo": %d}' % len(body) if body != b"boom" else (_ for _ in ()).throw(ValueError("boom"))


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with serving(Echo()) as srv:
        yield srv


def raw(srv: ModelServer, data: bytes) -> bytes:
    """Send bytes as they are; everything the server answers until it closes (or 5 s pass)."""
    with socket.create_connection(("127.0.0.1", srv.server_address[1]), timeout=5) as conn:
        conn.sendall(data)
        conn.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_a_burst_of_concurrent_clients_is_answered(server: ModelServer) -> None:
    def one(i: int) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
        try:
            conn.request("POST", "/invocations", body=b"x" * i, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    with ThreadPoolExecutor(max_workers=40) as pool:
        answers = list(pool.map(one, range(40)))
    assert answers == [(200, b'{"echo": %d}' % i) for i in range(40)]


@pytest.mark.parametrize("length", ["abc", "-5", "1e3", " "])
def test_a_malformed_content_length_is_a_400_and_the_connection_closes(
    server: ModelServer, length: str
) -> None:
    answer = raw(
        server, f"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n{{}}".encode()
    )
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert b"Content-Length" in body and b"non-negative integer" in body
    assert answer.count(b"HTTP/1.1") == 1  # nothing after it: the connection was closed


def test_a_chunked_body_is_read_and_the_connection_stays_usable(server: ModelServer) -> None:
    request = (
        b"POST /invocations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3\r\nabc\r\n4;ext=1\r\ndefg\r\n0\r\n\r\n"
        b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    answer = raw(server, request)
    assert answer.startswith(b"HTTP/1.1 200 ") and b'{"echo": 7}' in answer
    assert answer.count(b"HTTP/1.1 200 ") == 2  # the ping after it was framed correctly


def test_a_bad_chunk_size_and_a_body_over_the_limit_are_refused(server: ModelServer) -> None:
    bad = raw(server, b"POST /invocations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
    assert bad.startswith(b"HTTP/1.1 400 ") and b"hexadecimal" in bad
    big = raw(
        server, b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY_BYTES + 1)
    )
    assert big.startswith(b"HTTP/1.1 413 ") and b"InvokeEndpoint" in big


def test_the_handlers_error_is_still_a_400_with_its_message(server: ModelServer) -> None:
    answer: Any = raw(
        server, b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nConnection: close\r\n\r\nboom"
    )
    assert answer.startswith(b"HTTP/1.1 400 ") and b'"message": "boom"' in answer


def test_closing_the_server_ends_the_connections_a_client_keeps_alive() -> None:
    """A keep-alive client (an SDK's connection pool) held its handler thread, waiting for a next request, for
    as long as the client lived: the server's close ends those connections and their threads."""
    srv = ModelServer(port=0)
    thread = threading.Thread(target=srv.serve, args=(Echo(),))
    thread.start()
    before = set(threading.enumerate())
    kept = http.client.HTTPConnection("127.0.0.1", srv.server_address[1], timeout=30)
    try:
        kept.request("POST", "/invocations", body=b"{}", headers={"Content-Type": "application/json"})
        assert kept.getresponse().read() == b'{"echo": 2}'  # the connection stays open for a next request
        (serving,) = [t for t in threading.enumerate() if t not in before]
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=10)
        assert not serving.is_alive(), "the kept-alive connection's thread outlived the server"
    finally:
        kept.close()
