"""What kind of address a host is (L0: standard library only): loopback, link-local, private or public, decided
with :mod:`ipaddress`; the one place the package asks "is this loopback?".

The classes are ordered by how close to the user they are, and that order is the rule for where a peer may send
this process: a server on a class of address may name addresses of its own class or a farther one, never a nearer
one (:func:`may_send_to`). A public server may not send the client to the user's own network; an intranet server
(private) may name another private address; only a server on this host may name this host.
"""

from __future__ import annotations

import enum
import ipaddress
from typing import Final

__all__ = ("AddressClass", "address_class", "host_class", "is_loopback_host", "may_send_to")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class AddressClass(enum.IntEnum):
    """The class of an address, from the farthest (``PUBLIC``) to the nearest (``LOOPBACK``); ``RESERVED``
    (multicast, reserved and otherwise unroutable addresses) is never a place to send a request to."""

    PUBLIC = 0  #: globally routable (``is_global``)
    PRIVATE = 1  #: any other unicast address: 10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7, documentation ranges
    LINK_LOCAL = 2  #: 169.254/16 (where cloud metadata services answer), fe80::/10
    LOOPBACK = 3  #: 127/8, ::1, ``localhost``
    RESERVED = 4  #: multicast, 240/4, broadcast, the unspecified 0.0.0.0 and :: (all interfaces; as a destination,
    #: this host) and the like

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", "-")


_LOCALHOST: Final = "localhost"


def address_class(address: str | IPAddress) -> AddressClass:
    """The class of an IP address (a string, with or without brackets or an IPv6 zone, or an address object).
    An IPv4-mapped IPv6 address (``::ffff:127.0.0.1``) is the IPv4 address it maps. :class:`ValueError` when
    ``address`` is not an IP address."""
    if isinstance(address, str):
        address = ipaddress.ip_address(address.strip("[]"))
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return AddressClass.LOOPBACK
    if address.is_link_local:
        return AddressClass.LINK_LOCAL
    if address.is_multicast or address.is_reserved or address.is_unspecified:
        return AddressClass.RESERVED
    if address.is_global:
        return AddressClass.PUBLIC
    return AddressClass.PRIVATE


def host_class(host: str | None) -> AddressClass | None:
    """The class of a URL's host when it can be told without resolving it: ``localhost`` and its subdomains
    (RFC 6761 §6.3) are loopback, an IP literal is its address's class; None for any other name."""
    if not host:
        return None
    host = host.strip("[]").lower().rstrip(".")
    if host == _LOCALHOST or host.endswith("." + _LOCALHOST):
        return AddressClass.LOOPBACK
    try:
        return address_class(host)
    except ValueError:
        return None


def is_loopback_host(host: str | None) -> bool:
    """Whether ``host`` (a URL's host, or a listening address) is on the loopback interface, by its name alone."""
    return host_class(host) is AddressClass.LOOPBACK


def may_send_to(server: AddressClass, target: AddressClass) -> bool:
    """Whether a peer on an address of class ``server`` may send this process to one of class ``target``: the
    target is as far as the server or farther (a public server: public only; a private one: private or public;
    a link-local one: link-local too; a loopback one: anything but ``RESERVED``)."""
    return target is not AddressClass.RESERVED and target <= min(server, AddressClass.LOOPBACK)
