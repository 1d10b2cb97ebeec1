"""A scripted OpenAI-compatible chat server for tests: each POST /v1/chat/completions gets the
next scripted reply ({status, body, headers, delay}), then `default`; every request is kept.
The judges' client tests and the judge runs (a real worker included) talk to it over HTTP."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def completion(content, *, usage=None, message=None, finish_reason="stop") -> dict:
    """A chat.completion reply whose message has `content` (or is `message`)."""
    reply = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": message or {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
    }
    if usage is not None:
        reply["usage"] = usage
    return reply


def ok(answer, **kwargs) -> dict:
    return {"body": completion(json.dumps(answer), **kwargs)}


def refuse(status: int, message: str, **headers) -> dict:
    return {
        "status": status,
        "body": {"error": {"message": message, "type": "invalid_request_error"}},
        "headers": headers,
    }


class FakeOpenAI:
    """Answers each POST with the next scripted reply ({status, body, headers, delay}), then
    with `default`; keeps every request (with the client's address and port, so connections can
    be counted) and counts requests in flight at once. It serves as a plain HTTP proxy too: a
    request for an absolute URL is answered the same way."""

    def __init__(self):
        self.script: list[dict] = []
        self.default = {"status": 500, "body": {"error": {"message": "nothing scripted"}}}
        self.requests: list[dict] = []  # {"body", "headers", "at"}
        self.clock = time.monotonic  # what `at` is read from
        self.lock = threading.Lock()
        self.active = self.most_active = 0
        self.url = ""

    def handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # connections kept alive, as a real server keeps them
            disable_nagle_algorithm = True  # and no reply held for the client's delayed ACK (40 ms)

            def log_message(self, format, *args):  # noqa: A002 - the stdlib's signature
                pass

            def do_POST(self):  # noqa: N802 - the stdlib's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.requests.append(
                        {
                            "body": body,
                            "headers": dict(self.headers),
                            "at": fake.clock(),
                            "path": self.path,  # the absolute URL when it came through as a proxy
                            "client": self.client_address,  # (address, port): one port per connection
                        }
                    )
                    step = fake.script.pop(0) if fake.script else fake.default
                    fake.active += 1
                    fake.most_active = max(fake.most_active, fake.active)
                try:
                    time.sleep(step.get("delay", 0))
                    data = step["body"] if isinstance(step["body"], bytes) else json.dumps(step["body"]).encode()
                    self.send_response(step.get("status", 200))
                    for name, value in step.get("headers", {}).items():
                        self.send_header(name.replace("_", "-"), value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                finally:
                    with fake.lock:
                        fake.active -= 1

        return Handler


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client that timed out closed its socket: nothing to report


def start_fake_openai() -> tuple[FakeOpenAI, callable]:
    """A FakeOpenAI serving on 127.0.0.1 (a free port), and the function that stops it."""
    fake = FakeOpenAI()
    httpd = QuietServer(("127.0.0.1", 0), fake.handler())
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop():
        httpd.shutdown()
        httpd.server_close()

    fake.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    return fake, stop
