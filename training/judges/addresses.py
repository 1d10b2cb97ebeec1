"""Where a chat judge may send its requests (plain Python, no Django).

An admin chooses a judge's `base_url`, and the worker then POSTs the campaign's trajectories and
the judge's key there. So the address is vetted: never a link-local or cloud metadata address
(169.254.169.254 and friends, which hand out the machine's own credentials), nor one that is
not a host (multicast, unspecified, reserved); an address that is not public (private, loopback
IPv4 or IPv6, the shared address space 100.64.0.0/10 of carrier-grade NAT, and the other ranges
IANA marks not globally reachable: a model server on this machine, the office network or the
provider's) only where the deployment allows them. The name is
resolved and every address it gives is checked, at save and again at connect time; the
connection then goes to an address that was checked, so a name that changes its answer between
the check and the connection (DNS rebinding) reaches nothing it should not.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

# Cloud instance-metadata endpoints outside 169.254/16 (AWS IPv6, Alibaba Cloud).
METADATA = frozenset(ipaddress.ip_address(a) for a in ("fd00:ec2::254", "100.100.100.200"))
ALLOW_HINT = "JUDGE_ALLOW_PRIVATE_ADDRESSES"


def endpoint(url) -> tuple[str, str, int] | None:
    """Where a base URL sends requests: (scheme, host, port), the port defaulted by the scheme and
    the scheme and host in lower case; None for what is not an http(s) URL with a host."""
    try:
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or not parts.hostname or parts.scheme.lower() not in ("http", "https"):
            return None
        scheme = parts.scheme.lower()
        return scheme, parts.hostname.lower(), parts.port or (443 if scheme == "https" else 80)
    except ValueError:  # a port that is not a number
        return None


class AddressRefused(ValueError):
    """The judge's endpoint is an address it may not call; the message says which and why."""


def address_problem(address: str, *, allow_private: bool) -> str | None:
    """Why a judge may not call this IP address, or None."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_link_local or ip in METADATA:
        return "a link-local or cloud metadata address, which a judge never calls"
    if ip.is_loopback:  # before is_reserved, which ::1 (in ::/8) also is: a model on this machine
        return None if allow_private else _not_public()
    if ip.is_multicast or ip.is_unspecified or ip.is_reserved:
        return "not the address of a host"
    # is_private misses 100.64.0.0/10 (shared address space, reachable inside a provider's network);
    # is_global is false for it and for every other range that is not public.
    if not ip.is_global and not allow_private:
        return _not_public()
    return None


def _not_public() -> str:
    return (
        "not a public address (private, loopback or shared address space), which this deployment does not allow "
        f"judges to call ({ALLOW_HINT})"
    )


def vetted_addresses(host: str, port: int, *, allow_private: bool) -> list[str]:
    """Every address `host` resolves to, each checked; AddressRefused names the first refused.
    A name that does not resolve raises OSError (socket.gaierror)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = list(dict.fromkeys(info[4][0] for info in infos))
    for address in addresses:
        problem = address_problem(address, allow_private=allow_private)
        if problem:
            shown = host if host == address else f"{host} ({address})"
            raise AddressRefused(f"{shown} is {problem}")
    return addresses
