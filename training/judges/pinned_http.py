"""The judge client's HTTP: an httpx2 client whose direct connections go only to addresses vetted
as each connection is made (training/judges/addresses.py), so a name that resolves to a private
address after it was checked (DNS rebinding) cannot reach one. The TLS certificate is still
checked against the host name, and the environment's proxies are used as httpx would use them.

Built on public parts only: httpx2's custom-transport interface (`BaseTransport`), httpcore2's
`ConnectionPool` with a network backend of our own, and the standard library's proxy settings.
Plain Python, no Django.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import urllib.request
from collections.abc import Iterator

import httpcore2
import httpx2

from training.judges.addresses import vetted_addresses

# A request's headers and body are two writes: with Nagle's algorithm the body waited for the
# server's delayed ACK, 40 ms a request (benchmarks/judge_run.py found it).
NO_DELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
KEEPALIVE_S = 30.0


@contextlib.contextmanager
def _as_httpx_errors() -> Iterator[None]:
    """httpcore2's exceptions as httpx2's of the same name (httpx2 names each after httpcore's),
    so callers catch `httpx2.TransportError`, `httpx2.TimeoutException`, `httpx2.ConnectError`."""
    try:
        yield
    except Exception as exc:
        if not type(exc).__module__.startswith("httpcore2"):
            raise
        raise getattr(httpx2, type(exc).__name__, httpx2.TransportError)(str(exc)) from exc


class _Body(httpx2.SyncByteStream):
    def __init__(self, stream) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx_errors():
            yield from self._stream

    def close(self) -> None:
        if hasattr(self._stream, "close"):
            self._stream.close()


class PinnedTransport(httpx2.BaseTransport):
    """Requests over an httpcore2 pool whose backend connects only to vetted addresses."""

    def __init__(self, *, connections: int, allow_private: bool) -> None:
        self._pool = httpcore2.ConnectionPool(
            ssl_context=httpx2.create_ssl_context(),
            max_connections=connections,
            max_keepalive_connections=connections,
            keepalive_expiry=KEEPALIVE_S,
            network_backend=_PinnedBackend(allow_private=allow_private),
            socket_options=NO_DELAY,
        )

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        sent = httpcore2.Request(
            method=request.method,
            url=httpcore2.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx_errors():
            answer = self._pool.handle_request(sent)
        return httpx2.Response(
            status_code=answer.status, headers=answer.headers, stream=_Body(answer.stream), extensions=answer.extensions
        )

    def close(self) -> None:
        with _as_httpx_errors():
            self._pool.close()


class _PinnedBackend(httpcore2.SyncBackend):
    def __init__(self, *, allow_private: bool) -> None:
        self._allow_private = allow_private

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        # Each vetted address in turn, as socket.create_connection tries a name's: `localhost` may
        # give ::1 first to a model server listening on 127.0.0.1 only (vLLM's default 0.0.0.0).
        addresses = vetted_addresses(host, port, allow_private=self._allow_private)
        for address in addresses[:-1]:
            try:
                return super().connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore2.ConnectError:  # refused or unreachable; a timeout is not tried again
                continue
        return super().connect_tcp(addresses[-1], port, timeout, local_address, socket_options)


def environment_proxies() -> dict[str, str | None]:
    """{URL pattern: proxy URL, or None for no proxy} from the environment (HTTP_PROXY,
    HTTPS_PROXY, ALL_PROXY, NO_PROXY), by the rules httpx applies for its own default transport
    (curl's NO_PROXY rules), which a client given a transport of its own does not apply. A test
    checks this against httpx's own reading."""
    proxies = urllib.request.getproxies()
    patterns: dict[str, str | None] = {}
    for scheme in ("http", "https", "all"):
        if url := proxies.get(scheme):
            patterns[f"{scheme}://"] = url if "://" in url else f"http://{url}"
    for host in (h.strip() for h in proxies.get("no", "").split(",")):
        if host == "*":
            return {}
        if host:
            patterns[_no_proxy_pattern(host)] = None
    patterns.pop("", None)
    return {pattern: url for pattern, url in patterns.items() if _parses(pattern)}


def _no_proxy_pattern(host: str) -> str:
    """One NO_PROXY entry as an httpx mount pattern ("" for one httpx ignores)."""
    address = host.split("/")[0]
    if "://" in host:
        return host
    if _is_address(address, ipaddress.IPv4Address):
        return f"all://{host}"
    if _is_address(address, ipaddress.IPv6Address):
        address, _, subnet = host.partition("/")
        return f"all://[{address}]/{subnet}" if subnet else f"all://[{host}]"
    if host.lower() == "localhost" or host.startswith("[") or (host.startswith("*.") and "/" not in host):
        return f"all://{host}"
    return f"all://*{host}" if "/" not in host else ""


def _is_address(text: str, kind) -> bool:
    try:
        kind(text)
    except ValueError:
        return False
    return True


def _parses(pattern: str) -> bool:
    """Whether httpx can read the pattern (it skips, like curl and Go, an entry it cannot)."""
    try:
        httpx2.URL(pattern.replace("all://", "http://", 1).replace("*", "x"))
    except httpx2.InvalidURL:
        return False
    return True


def pinned_client(*, concurrency: int, timeout_s: float, allow_private: bool) -> httpx2.Client:
    """The judge's client: `concurrency` connections at most, each to a vetted address."""
    connections = max(1, concurrency)
    limits = httpx2.Limits(max_connections=connections)
    return httpx2.Client(
        transport=PinnedTransport(connections=connections, allow_private=allow_private),
        mounts={
            pattern: None if url is None else httpx2.HTTPTransport(proxy=url, limits=limits)
            for pattern, url in environment_proxies().items()
        },
        timeout=httpx2.Timeout(timeout_s),
    )
