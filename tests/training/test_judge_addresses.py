"""Where a chat judge may call (issue 45): never a link-local or cloud metadata address, private
and loopback ones only where the deployment allows them (on for the embedded default), checked
at save and again at every connection, and the connection goes to the address that was checked."""

from __future__ import annotations

import socket
import threading

import pytest

from annotate.models import Judge
from tests.conftest import token_client
from tests.factories import UserFactory
from tests.fake_openai import FakeOpenAI, QuietServer, ok, start_fake_openai
from training.judges.addresses import AddressRefused, address_problem, vetted_addresses
from training.judges.chat import ChatJudgeClient, ChatJudgeSettings

SCHEMA = {"type": "object", "properties": {"verdict": {"type": "string"}}, "required": ["verdict"]}
MESSAGE = {"role": "user", "content": "q"}


@pytest.mark.parametrize(
    ("address", "private_ok", "refused"),
    [
        ("169.254.169.254", True, True),  # cloud metadata: never
        ("169.254.1.1", True, True),
        ("fe80::1", True, True),
        ("fd00:ec2::254", True, True),
        ("::ffff:169.254.169.254", True, True),
        ("100.100.100.200", True, True),
        ("0.0.0.0", True, True),
        ("224.0.0.1", True, True),
        ("127.0.0.1", True, False),
        ("127.0.0.1", False, True),
        ("10.1.2.3", False, True),
        ("192.168.0.5", True, False),
        ("::1", False, True),
        ("8.8.8.8", False, False),
        # Issue 53: the shared address space (carrier-grade NAT) is not public; IPv6 loopback is loopback.
        ("100.64.0.1", False, True),
        ("100.127.255.254", False, True),
        ("::ffff:100.64.0.1", False, True),
        ("100.64.0.1", True, False),
        ("100.63.255.255", False, False),  # just outside it: public
        ("100.128.0.0", False, False),
        ("::1", True, False),
        ("::ffff:127.0.0.1", True, False),
        ("fd12:3456::1", False, True),
        ("240.0.0.1", True, True),  # reserved: never a host
    ],
)
def test_the_address_rule(address, private_ok, refused):
    assert (address_problem(address, allow_private=private_ok) is not None) == refused


def test_a_name_is_refused_when_any_address_it_gives_is(monkeypatch):
    answers = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", 443))]
    answers.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", 443)))
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: answers)
    with pytest.raises(AddressRefused, match="metadata"):
        vetted_addresses("judge.example.com", 443, allow_private=True)


@pytest.mark.django_db
def test_saving_a_judge_on_a_forbidden_address_is_refused(settings):
    api = token_client(UserFactory(roles=["admin"]))
    settings.JUDGE_ALLOW_PRIVATE_ADDRESSES = False
    for url in ("http://169.254.169.254/latest", "http://127.0.0.1:5432/v1", "http://localhost:6379/v1"):
        body = {"name": "j", "kind": "chat", "config": {"base_url": url, "model": "m"}}
        response = api.post("/api/v1/judges/", body, format="json")
        assert response.status_code == 400 and "config.base_url" in str(response.json()), (url, response.json())
    settings.JUDGE_ALLOW_PRIVATE_ADDRESSES = True  # the embedded default: a local model server
    body = {"name": "local", "kind": "chat", "config": {"base_url": "http://127.0.0.1:8000/v1", "model": "m"}}
    assert api.post("/api/v1/judges/", body, format="json").status_code == 201
    metadata = {"name": "meta", "kind": "chat", "config": {"base_url": "http://169.254.169.254/v1", "model": "m"}}
    assert api.post("/api/v1/judges/", metadata, format="json").status_code == 400  # never, allowed or not
    assert list(Judge.objects.values_list("name", flat=True)) == ["local"]


def test_a_name_that_turns_private_after_the_save_is_refused_at_connect_time(request, monkeypatch):
    """DNS rebinding: the name resolved to a public address when saved; at connection time it
    gives a loopback one, and no request is sent there."""
    fake, stop = start_fake_openai()
    request.addfinalizer(stop)
    fake.default = ok({"verdict": "A"})
    port = int(fake.url.split(":")[2].split("/")[0])
    settings = ChatJudgeSettings(base_url=f"http://judge.example.com:{port}/v1", model="m", max_retries=0)
    real = socket.getaddrinfo
    monkeypatch.setattr(
        socket,
        "getaddrinfo",
        lambda host, *a, **k: real("127.0.0.1", *a, **k) if host == "judge.example.com" else real(host, *a, **k),
    )
    refused = ChatJudgeClient(settings, schema=SCHEMA, allow_private=False, sleep=lambda s: None).ask(
        [{"role": "user", "content": "q"}]
    )
    assert refused.answer is None and "refused to call" in refused.calls[-1].error and not fake.requests
    allowed = ChatJudgeClient(settings, schema=SCHEMA, allow_private=True, sleep=lambda s: None).ask(
        [{"role": "user", "content": "q"}]
    )
    assert allowed.answer == {"verdict": "A"} and len(fake.requests) == 1  # pinned to the vetted address


def _fake_on(family: int, address: str, request):
    """A scripted OpenAI server listening on `address` only (IPv4 or IPv6); its port."""
    fake = FakeOpenAI()
    fake.default = ok({"verdict": "A"})

    class Server(QuietServer):
        address_family = family

    httpd = Server((address, 0), fake.handler())
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    request.addfinalizer(lambda: (httpd.shutdown(), httpd.server_close()))
    return fake, httpd.server_address[1]


def test_a_model_on_ipv6_loopback_is_called_where_private_addresses_are_allowed(request):
    fake, port = _fake_on(socket.AF_INET6, "::1", request)
    settings = ChatJudgeSettings(base_url=f"http://[::1]:{port}/v1", model="m", max_retries=0)
    allowed = ChatJudgeClient(settings, schema=SCHEMA, allow_private=True, sleep=lambda s: None).ask([MESSAGE])
    assert allowed.answer == {"verdict": "A"} and len(fake.requests) == 1
    refused = ChatJudgeClient(settings, schema=SCHEMA, allow_private=False, sleep=lambda s: None).ask([MESSAGE])
    assert refused.answer is None and "not a public address" in refused.calls[-1].error and len(fake.requests) == 1


@pytest.mark.parametrize(("family", "address"), [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")])
def test_localhost_giving_both_loopbacks_reaches_a_server_on_either(request, monkeypatch, family, address):
    """`localhost` may resolve to ::1 first; a model server may listen on 127.0.0.1 only (vLLM's
    default) or ::1 only: the name is allowed, and each vetted address is tried in turn."""
    fake, port = _fake_on(family, address, request)
    real = socket.getaddrinfo
    both = [
        (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", port, 0, 0)),
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)),
    ]
    monkeypatch.setattr(
        socket, "getaddrinfo", lambda host, *a, **k: both if host == "localhost" else real(host, *a, **k)
    )
    settings = ChatJudgeSettings(base_url=f"http://localhost:{port}/v1", model="m", max_retries=0)
    got = ChatJudgeClient(settings, schema=SCHEMA, allow_private=True, sleep=lambda s: None).ask([MESSAGE])
    assert got.answer == {"verdict": "A"} and len(fake.requests) == 1, got.error


@pytest.mark.django_db
def test_saving_a_judge_on_the_shared_address_space_needs_private_addresses_allowed(settings):
    api = token_client(UserFactory(roles=["admin"]))
    body = {"name": "cgnat", "kind": "chat", "config": {"base_url": "http://100.64.12.7:8000/v1", "model": "m"}}
    settings.JUDGE_ALLOW_PRIVATE_ADDRESSES = False
    refused = api.post("/api/v1/judges/", body, format="json")
    assert refused.status_code == 400 and "not a public address" in refused.json()["detail"]
    settings.JUDGE_ALLOW_PRIVATE_ADDRESSES = True
    assert api.post("/api/v1/judges/", body, format="json").status_code == 201
