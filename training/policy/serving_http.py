"""The policy server's HTTP side: an ASGI app under uvicorn (training/policy/serving.py generates).

    POST /v1/chat/completions   a chat completion, or its stream (server-sent events)
    GET  /v1/models             the one model served;  GET /v1/models/NAME
    GET  /health                no key needed

Every refusal is OpenAI's error shape, `{"error": {"message", "type", "param", "code"}}`, with a
4xx status: a body that is not JSON, an unknown route, a method a route does not take (OPTIONS
included), a body over MAX_BODY, a missing key. With an API key the key is checked before the
body is read, and a body over the limit is refused by its Content-Length before it is read.

Nothing waits forever on a client: a connection whose request's headers have not all come
HEADER_SECONDS after it opened or after its last response is closed (trickling header bytes
does not keep it), a body must arrive within BODY_SECONDS, an idle kept-alive connection closes
after KEEP_ALIVE_SECONDS; a client that goes away mid-stream ends its rows' generation. At
MAX_CONNECTIONS, a new connection closes the longest idle ones (no request in progress) rather
than be answered 503: 512 kept-alive connections trickling headers no longer shut real clients
out (issue 53). No thread is held by a connection: requests wait on the generation thread's
batches (serving.Batcher), and the work a request's size decides (reading its JSON, rendering
and tokenizing its prompt, checked by size first) runs in a worker thread, so /health and
other clients are answered while a large request is read.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import socket
import threading
import time

from core import json_input
from core.ids import ascii_digits
from training.policy.serving import PolicyServer, Prepared, chunk, stream_chunks
from training.policy.serving_requests import MAX_BODY, RESPONSES_REFUSAL, RequestError, parse_request

log = logging.getLogger(__name__)

HEADER_SECONDS = 10.0
BODY_SECONDS = 30.0
KEEP_ALIVE_SECONDS = 5
MAX_CONNECTIONS = 512


def _json(status: int, body: dict):
    from starlette.responses import JSONResponse

    return JSONResponse(body, status_code=status)


def _refusal(error: RequestError):
    return _json(error.status, error.body())


class PolicyApp:
    """The ASGI application of one PolicyServer."""

    def __init__(self, server: PolicyServer, api_key: str | None = None, *, body_seconds: float = BODY_SECONDS):
        self.server, self.api_key, self.body_seconds = server, api_key, body_seconds

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":  # uvicorn runs it with lifespan="off"
            return
        from starlette.requests import Request

        request = Request(scope, receive)
        try:
            response = await self.answer(request)
        except RequestError as exc:
            response = _refusal(exc)
        except Exception as exc:  # noqa: BLE001 - a fault of the server, answered in the API's shape
            log.exception("%s %s failed", request.method, request.url.path)
            response = _refusal(RequestError(f"the server failed: {type(exc).__name__}: {exc}", status=500))
        await response(scope, receive, send)

    async def answer(self, request):
        path, method = request.url.path.rstrip("/"), request.method
        if path == "/health" and method in ("GET", "HEAD"):
            return _json(200, {"status": "ok", "model": self.server.name})
        self._check_key(request)
        if method in ("GET", "HEAD"):
            return self._get(path)
        if method != "POST":
            raise RequestError(f"method not allowed: {method} {path or '/'}", status=405)
        if path == "/v1/responses":
            raise RequestError(RESPONSES_REFUSAL, status=404)
        if path != "/v1/chat/completions":
            raise RequestError(f"no route {path}", status=404)
        body = await self._body(request)
        if problem := self.server.model_problem(body):
            raise problem
        prepared = await asyncio.to_thread(lambda: self.server.prepare(parse_request(body)))
        if prepared.request.stream:
            return self._stream(prepared)
        _, rows, done = self.server.start(prepared)
        await self._finished(done)
        return _json(200, await asyncio.to_thread(self.server.completion, prepared, rows))

    def _check_key(self, request) -> None:
        if not self.api_key:
            return
        given = request.headers.get("authorization", "")
        if not secrets.compare_digest(given.encode(), f"Bearer {self.api_key}".encode()):
            raise RequestError("a valid API key: Authorization: Bearer KEY", status=401)

    def _get(self, path: str):
        server = self.server
        if path == "/v1/models":
            model = {"id": server.name, "object": "model", "created": server.created, "owned_by": "arbiter"}
            return _json(200, {"object": "list", "data": [model]})
        if path == f"/v1/models/{server.name}":
            return _json(200, {"id": server.name, "object": "model", "created": server.created})
        if path == "/v1/responses":
            raise RequestError(RESPONSES_REFUSAL, status=404)
        if path == "/v1/chat/completions":  # the route exists; it takes POST
            raise RequestError("method not allowed: POST a chat completion request", status=405)
        raise RequestError(f"no route {path}", status=404)

    async def _body(self, request):
        """The JSON body, read within BODY_SECONDS and MAX_BODY bytes (its declared length first)."""
        from starlette.requests import ClientDisconnect

        declared = request.headers.get("content-length", "")
        if declared and not ascii_digits(declared):
            raise RequestError("Content-Length: a whole number of bytes")
        if declared and int(declared) > MAX_BODY:
            raise RequestError(f"a body of at most {MAX_BODY} bytes", status=413)

        async def read() -> bytes:
            chunks, size = [], 0
            async for part in request.stream():
                size += len(part)
                if size > MAX_BODY:
                    raise RequestError(f"a body of at most {MAX_BODY} bytes", status=413)
                chunks.append(part)
            return b"".join(chunks)

        try:
            raw = await asyncio.wait_for(read(), self.body_seconds)
        except TimeoutError:
            raise RequestError(f"the body did not arrive within {self.body_seconds:g} s", status=408) from None
        except ClientDisconnect:
            raise RequestError("the client went away before its body arrived", status=400) from None
        try:
            return await asyncio.to_thread(json_input.loads, raw)
        except json_input.JsonInputError as exc:
            raise RequestError(f"the body: {exc}") from None

    @staticmethod
    async def _finished(done) -> None:
        try:
            await asyncio.wrap_future(done)
        except Exception as exc:  # noqa: BLE001 - a fault of the server, answered rather than dropped
            raise RequestError(f"the server failed: {type(exc).__name__}: {exc}", status=500) from None

    def _stream(self, prepared: Prepared):
        """Server-sent chunks: each row's content as it is generated, then its calls and its end."""
        from starlette.responses import StreamingResponse

        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue = asyncio.Queue()
        gone = threading.Event()

        def on_delta(index: int, delta: dict) -> None:
            loop.call_soon_threadsafe(pieces.put_nowait, (index, delta))

        live = prepared.streams_as_generated
        texts, rows, done = self.server.start(prepared, on_delta if live else None, cancelled=gone.is_set)
        done.add_done_callback(lambda _: loop.call_soon_threadsafe(pieces.put_nowait, None))
        base = {"id": f"chatcmpl-{secrets.token_hex(12)}", "object": "chat.completion.chunk", "model": self.server.name}
        base["created"] = int(time.time())  # when the request was answered, as a completion's `created`

        def event(item: dict) -> str:
            return f"data: {json.dumps(item)}\n\n"

        async def events():
            try:
                if live:
                    for index in range(prepared.rows):
                        yield event(chunk(base, index, {"role": "assistant", "content": ""}))
                while (piece := await pieces.get()) is not None:
                    yield event(chunk(base, *piece))
                try:
                    await self._finished(done)
                    completion = await asyncio.to_thread(self.server.completion, prepared, rows)
                    sent = [text.text[: text.sent] for text in texts] if live else None
                    calls = [text.calls for text in texts] if live else None
                    rest = stream_chunks({**completion, **base}, prepared.request.include_usage, sent=sent, calls=calls)
                except RequestError as exc:  # a failed batch; a forced call, JSON reply or streamed call not written
                    yield event(exc.body())
                    return
                for item in rest:
                    yield event(item)
                yield "data: [DONE]\n\n"
            finally:
                gone.set()  # the client went away (or the stream ended): its rows stop

        return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


def _protocol(max_connections: int = MAX_CONNECTIONS):
    """uvicorn's h11 protocol, closing a connection that has not sent a whole request within
    HEADER_SECONDS of opening or of its last response, and, when a new connection makes
    `max_connections`, the longest idle ones (uvicorn answers every request 503 while it holds
    that many, idle or not). With TCP_NODELAY: a response's headers and body go out as two
    writes, and with Nagle's algorithm the body waited for the client's delayed ACK, 40 ms a
    request (asyncio sets it only on sockets made with IPPROTO_TCP; benchmarks/serve_concurrent.py
    found it)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Protocol(H11Protocol):
        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            sock = transport.get_extra_info("socket")
            if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._idle()
            self._make_room()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._idle()

        def _idle(self) -> None:
            """From now the next request's headers have HEADER_SECONDS to arrive."""
            self.idle_since = time.monotonic()
            self.loop.call_later(HEADER_SECONDS, self._silent, self.idle_since)

        def _silent(self, since: float) -> None:
            waiting = self.cycle is None or self.cycle.response_complete
            if since == self.idle_since and waiting and not self.transport.is_closing():
                self.transport.close()

        def _make_room(self) -> None:
            connections = self.server_state.connections
            extra = len(connections) - (max_connections - 1)
            if extra <= 0:
                return
            idle = [c for c in connections if c is not self and (c.cycle is None or c.cycle.response_complete)]
            for connection in sorted(idle, key=lambda c: getattr(c, "idle_since", 0.0))[:extra]:
                connection.transport.close()

    return Protocol


class PolicyHTTPServer:
    """uvicorn serving a PolicyApp on a socket bound at once (so its port is known before it
    runs): `serve_forever()` blocks, `shutdown()` stops it from another thread."""

    def __init__(self, app: PolicyApp, host: str, port: int, *, max_connections: int = MAX_CONNECTIONS):
        import uvicorn

        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.app = app
        self.socket = socket.create_server((host, port), family=family, backlog=2048)
        self.server_address = self.socket.getsockname()
        config = uvicorn.Config(
            app,
            http=_protocol(max_connections),
            lifespan="off",
            log_level="warning",
            access_log=False,
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
            limit_concurrency=max_connections,
        )
        self.uvicorn = uvicorn.Server(config)
        self.stopped = threading.Event()

    def serve_forever(self, poll_interval: float | None = None) -> None:
        try:
            self.uvicorn.run(sockets=[self.socket])
        finally:
            self.stopped.set()

    def shutdown(self) -> None:
        self.uvicorn.should_exit = True
        self.stopped.wait(30)

    def server_close(self) -> None:
        self.socket.close()
        self.app.server.close()


def serve(server: PolicyServer, host: str, port: int, api_key: str | None = None) -> PolicyHTTPServer:
    """The HTTP server of `server` (call `serve_forever()` on it; `shutdown()` stops it)."""
    return PolicyHTTPServer(PolicyApp(server, api_key), host, port)
