"""jsonrpc_mcp.addresses: the class of an address, and where a peer on one class may send the client."""

from __future__ import annotations

import pytest

from jsonrpc_mcp.addresses import AddressClass, address_class, host_class, is_loopback_host, may_send_to

PUBLIC, PRIVATE, LINK_LOCAL, LOOPBACK, RESERVED = AddressClass


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("93.184.216.34", PUBLIC),
        ("2606:4700::1111", PUBLIC),
        ("10.1.2.3", PRIVATE),
        ("172.16.0.1", PRIVATE),
        ("192.168.1.1", PRIVATE),
        ("100.64.0.1", PRIVATE),  # carrier-grade NAT: not globally routable
        ("fd00::1", PRIVATE),
        ("169.254.169.254", LINK_LOCAL),  # cloud metadata services
        ("fe80::1", LINK_LOCAL),
        ("fe80::1%eth0", LINK_LOCAL),
        ("127.0.0.1", LOOPBACK),
        ("127.8.9.10", LOOPBACK),
        ("::1", LOOPBACK),
        ("[::1]", LOOPBACK),
        ("::ffff:127.0.0.1", LOOPBACK),  # IPv4-mapped: the IPv4 address it maps
        ("::ffff:10.0.0.1", PRIVATE),
        ("::ffff:169.254.169.254", LINK_LOCAL),
        ("0.0.0.0", RESERVED),  # all interfaces; as a destination, this host
        ("::", RESERVED),
        ("224.0.0.1", RESERVED),
        ("240.0.0.1", RESERVED),
        ("255.255.255.255", RESERVED),
    ],
)
def test_the_class_of_an_address(address: str, expected: AddressClass) -> None:
    assert address_class(address) is expected


def test_a_name_has_no_class_until_resolved_but_localhost_is_loopback() -> None:
    assert host_class("mcp.example.com") is None
    assert host_class("localhost") is host_class("LOCALHOST.") is host_class("app.localhost") is LOOPBACK
    assert host_class("localhost.example.com") is None
    assert host_class("") is host_class(None) is None
    with pytest.raises(ValueError):
        address_class("mcp.example.com")


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("::1", True), ("[::1]", True), ("localhost", True), ("0.0.0.0", False), ("::", False)],
)
def test_a_listening_address_is_loopback_or_not(host: str, loopback: bool) -> None:
    """What the HTTP server and the consent listener ask: 0.0.0.0 listens on every interface, not loopback."""
    assert is_loopback_host(host) is loopback


@pytest.mark.parametrize(
    ("server", "allowed"),
    [
        (PUBLIC, {PUBLIC}),
        (PRIVATE, {PUBLIC, PRIVATE}),  # an intranet server may name an authorization server on 10/8
        (LINK_LOCAL, {PUBLIC, PRIVATE, LINK_LOCAL}),
        (LOOPBACK, {PUBLIC, PRIVATE, LINK_LOCAL, LOOPBACK}),
        (RESERVED, {PUBLIC, PRIVATE, LINK_LOCAL, LOOPBACK}),
    ],
)
def test_a_server_may_send_the_client_only_as_far_as_its_own_class_or_farther(
    server: AddressClass, allowed: set[AddressClass]
) -> None:
    assert {target for target in AddressClass if may_send_to(server, target)} == allowed


@pytest.mark.parametrize(("host", "warned"), [("0.0.0.0", True), ("::", True), ("[::1]", False), ("localhost", False)])
def test_serving_beyond_loopback_without_allowed_hosts_is_warned_of(
    host: str, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    from http_support import make_server

    from jsonrpc_mcp.transports.http_serve import make_uvicorn_server

    make_uvicorn_server(make_server(), host, 0)
    assert any("only loopback Host names are accepted" in r.getMessage() for r in caplog.records) is warned


def test_http_serving_listens_on_loopback_unless_told_otherwise() -> None:
    """What serves HTTP binds 127.0.0.1 when no host is named (all network interfaces only when asked)."""
    import inspect

    from jsonrpc_mcp.transports import http_serve

    for function in (
        http_serve.serve_http,
        http_serve.serve_http_async,
        http_serve.make_uvicorn_server,
        http_serve.bind_socket,
    ):
        assert inspect.signature(function).parameters["host"].default == "127.0.0.1", function
    with http_serve.bind_socket(port=0) as sock:
        assert sock.getsockname()[0] == "127.0.0.1"
