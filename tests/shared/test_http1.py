"""shared/http1.py against servers speaking raw HTTP/1.1 on loopback (and TLS with a throwaway CA):
framing, keep-alive, the kept connection the server closed, streaming, errors and timeouts."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest

import shared.http1
from shared.http1 import Http1Transport
from shared.http1_wire import proxied
from tests.channel_servers.email.certificates import make_certificates
from tests.raw_http import read_request, serving

pytestmark = pytest.mark.anyio


def answer(body: bytes, *, status: bytes = b"200 OK", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 %s\r\ncontent-length: %d\r\n%s\r\n%s" % (status, len(body), extra, body)


async def echo_forever(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        line, _, body = await read_request(reader)
        writer.write(answer(line + b"|" + body))
        await writer.drain()


def client(**options: object) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=Http1Transport(), **options)  # type: ignore[arg-type]


async def test_requests_share_one_kept_connection() -> None:
    async with serving(echo_forever) as server, client() as http:
        for i in range(3):
            response = await http.post(f"http://127.0.0.1:{server.port}/a?b={i}", content=b"x" * i)
            assert response.status_code == 200
            assert response.text == f"POST /a?b={i} HTTP/1.1|{'x' * i}"
    assert server.connections == 1


async def test_a_chunked_response_streams_as_it_arrives_and_a_drain_goes_on_where_reading_stopped() -> None:
    release = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5;ext=1\r\nfirst\r\n")
            await writer.drain()
            await release.wait()
            writer.write(b"6\r\nsecond\r\n0\r\ntrailer: x\r\n\r\n")
            await writer.drain()
            release.clear()

    async with serving(handler) as server, client() as http:
        url = f"http://127.0.0.1:{server.port}/"
        async with http.stream("GET", url) as response:
            stream = response.stream
            first = await anext(aiter(stream))  # type: ignore[arg-type]
            assert first == b"first"  # before the rest was sent
            release.set()
            assert [chunk async for chunk in stream] == [b"second"]  # type: ignore[union-attr]
        release.set()
        assert (await http.get(url)).text == "firstsecond"
    assert server.connections == 1


async def test_a_kept_connection_the_server_closed_is_replaced_and_the_request_sent_again() -> None:
    hung_up: list[bytes] = []

    async def one_answer_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line, _, body = await read_request(reader)
        writer.write(answer(line + b"|" + body))  # no "connection: close": the client keeps it
        await writer.drain()
        hung_up.append(await reader.read(1))  # the next request's first byte, then hang up unanswered

    async with serving(one_answer_then_close) as server, client() as http:
        url = f"http://127.0.0.1:{server.port}/"
        assert (await http.post(url, content=b"one")).text == "POST / HTTP/1.1|one"
        assert (await http.post(url, content=b"two")).text == "POST / HTTP/1.1|two"
    assert hung_up[0] == b"P"  # the second request went out on the kept connection first
    assert server.connections == 2  # then on a new one, which answered it


async def test_a_response_cut_after_it_began_is_an_error_not_a_resend() -> None:
    async def half(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc")
        await writer.drain()

    async with serving(half) as server, client() as http:
        with pytest.raises(httpx2.RemoteProtocolError, match="mid-response"):
            await http.get(f"http://127.0.0.1:{server.port}/")
    assert server.connections == 1


@pytest.mark.parametrize(
    ("response", "reused"),
    [
        (b"HTTP/1.0 200 OK\r\n\r\nuntil the end", False),
        (b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 13\r\n\r\nuntil the end", False),
        (b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 13\r\n\r\nuntil the end", True),
    ],
)
async def test_a_connection_is_kept_only_when_the_response_allows_it(response: bytes, reused: bool) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            writer.write(response)
            await writer.drain()
            if not reused:
                return

    async with serving(handler) as server, client() as http:
        for _ in range(2):
            assert (await http.get(f"http://127.0.0.1:{server.port}/")).text == "until the end"
    assert server.connections == (1 if reused else 2)


async def test_responses_without_a_body_and_informational_ones() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            line, _, _ = await read_request(reader)
            if line.startswith(b"HEAD"):
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 99\r\n\r\n")
            elif b"/empty" in line:
                writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
            else:
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n" + answer(b"final", status=b"201 Created"))
            await writer.drain()

    async with serving(handler) as server, client() as http:
        base = f"http://127.0.0.1:{server.port}"
        head = await http.head(base + "/")
        assert (head.status_code, head.headers["content-length"], head.content) == (200, "99", b"")
        empty = await http.get(base + "/empty")
        assert (empty.status_code, empty.content) == (204, b"")
        created = await http.post(base + "/make", content=b"x")
        assert (created.status_code, created.reason_phrase, created.text) == (201, "Created", "final")
    assert server.connections == 1


async def test_a_streamed_request_body_goes_out_chunked() -> None:
    seen: list[tuple[dict[bytes, bytes], bytes]] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _, headers, body = await read_request(reader)
        seen.append((headers, body))
        writer.write(answer(b"ok"))
        await writer.drain()

    async def parts() -> AsyncIterator[bytes]:
        for part in (b"one ", b"", b"two"):
            yield part

    async with serving(handler) as server, client() as http:
        assert (await http.post(f"http://127.0.0.1:{server.port}/", content=parts())).text == "ok"
    ((headers, body),) = seen
    assert headers[b"transfer-encoding"] == b"chunked"
    assert body == b"one two"


@pytest.mark.parametrize(
    ("response", "problem"),
    [
        (b"SPDY/9 200 OK\r\n\r\n", "malformed status line"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "malformed header line"),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n", "malformed chunk size"),
        (b"HTTP/1.1 200 OK\r\nx-big: " + b"a" * (300 * 1024) + b"\r\n\r\n", "exceed"),
        (b"", "without sending a response"),
    ],
)
async def test_a_malformed_or_missing_response_is_a_protocol_error(response: bytes, problem: str) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(response)
        await writer.drain()

    async with serving(handler) as server, client() as http:
        with pytest.raises(httpx2.RemoteProtocolError, match=problem):
            await http.get(f"http://127.0.0.1:{server.port}/")


async def test_timeouts_and_refused_connections_are_httpx_errors() -> None:
    answered = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await answered.wait()

    async with serving(silent) as server, client(timeout=httpx2.Timeout(5.0, read=0.05)) as http:
        with pytest.raises(httpx2.ReadTimeout):
            await http.get(f"http://127.0.0.1:{server.port}/")
        port = server.port
        answered.set()
    async with client() as http:
        with pytest.raises(httpx2.ConnectError, match=f"127.0.0.1:{port}"):
            await http.get(f"http://127.0.0.1:{port}/")
        with pytest.raises(httpx2.UnsupportedProtocol):
            await Http1Transport().handle_async_request(httpx2.Request("GET", "ftp://127.0.0.1/"))


async def test_an_idle_connection_past_its_keepalive_is_not_reused() -> None:
    now = [1000.0]
    transport = Http1Transport(clock=lambda: now[0])
    async with serving(echo_forever) as server, httpx2.AsyncClient(transport=transport) as http:
        url = f"http://127.0.0.1:{server.port}/"
        await http.get(url)
        now[0] += shared.http1.KEEPALIVE_S - 0.1
        await http.get(url)
        assert server.connections == 1
        now[0] += shared.http1.KEEPALIVE_S + 0.1
        await http.get(url)
    assert server.connections == 2


async def test_tls_with_a_trusted_certificate_and_refused_without(tmp_path: Path) -> None:
    certificates = make_certificates(tmp_path)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(certificates.cert_file, certificates.key_file)
    trusting = ssl.create_default_context(cafile=str(certificates.ca_file))
    async with serving(echo_forever, server_context) as server:
        url = f"https://localhost:{server.port}/secure"
        async with httpx2.AsyncClient(transport=Http1Transport(ssl_context=trusting)) as http:
            for _ in range(2):
                assert (await http.get(url)).text == "GET /secure HTTP/1.1|"
        assert server.connections == 1
        async with httpx2.AsyncClient(
            transport=Http1Transport(ssl_context=ssl.create_default_context())
        ) as http:
            with pytest.raises(httpx2.ConnectError, match="certificate"):
                await http.get(url)


@pytest.mark.parametrize(
    ("environment", "url", "expected"),
    [
        ({}, "https://api.example.com/v1", False),
        ({"HTTPS_PROXY": "http://proxy:3128"}, "https://api.example.com/v1", True),
        ({"HTTPS_PROXY": "http://proxy:3128"}, "http://127.0.0.1:8080/v1", False),
        ({"ALL_PROXY": "http://proxy:3128"}, "http://127.0.0.1:8080/v1", True),
        (
            {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "example.com"},
            "https://api.example.com/v1",
            False,
        ),
    ],
)
def test_which_urls_the_environment_sends_through_a_proxy(
    monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], url: str, expected: bool
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert proxied(url) is expected


async def test_a_kept_connection_the_server_lets_go_is_closed_on_our_side_too() -> None:
    async def answer_then_hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(answer(b"bye"))  # keep-alive as far as the headers say, then the server ends it
        await writer.drain()

    transport = Http1Transport()
    async with serving(answer_then_hang_up) as server, httpx2.AsyncClient(transport=transport) as http:
        assert (await http.get(f"http://127.0.0.1:{server.port}/")).text == "bye"
        [kept] = [c for idle in transport._idle.values() for c in idle]
        assert await kept.reader.read() == b""  # the server's end reached us
        assert kept.writer.is_closing()  # and closed our end: nothing left half open for the collector


async def test_a_request_the_server_does_not_take_in_time_is_a_write_timeout() -> None:
    done = asyncio.Event()

    async def never_reads(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await done.wait()

    async with serving(never_reads) as server:
        async with client(timeout=httpx2.Timeout(5.0, write=0.1)) as http:
            with pytest.raises(httpx2.WriteTimeout):
                await http.post(f"http://127.0.0.1:{server.port}/", content=b"x" * (64 << 20))
        done.set()
