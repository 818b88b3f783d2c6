"""What a request's headers decide before its body is read: Host, Origin, token,
Content-Type and size, in that order.

Contract. ``check_request`` raises ``Refused`` (403 ``forbidden_host`` or
``forbidden_origin``: a web page reaching the service by DNS rebinding or from another
site; 401 ``unauthorized``; 415 ``not_json``; 413 ``too_large``, naming the limit,
``limit``, and its value; 411 ``length_required``) or returns. A Host (or Origin) is
answered when it names localhost, a loopback address, the address the service listens
on (any address of the machine for 0.0.0.0) or one of ``allowed_hosts`` ("*": any). A
request without a Host names no other host. The token is compared in a time that does
not depend on where a wrong one differs.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from typing import Any

from gpukeras.serve.service_body import Refused, Served, client_text, refuse


def host_name(value: str) -> str:
    """A Host header's (or an Origin's) host: without its port and the brackets of an IPv6
    address, in lower case, without a final dot."""
    value = value.lower()
    bracketed = re.fullmatch(r"\[([^]]*)\](:[0-9]*)?", value)
    name = bracketed.group(1) if bracketed else re.sub(r":[0-9]*$", "", value)
    return name[:-1] if name.endswith(".") else name


def served_hosts(host: str | None, allowed: object) -> dict[str, Any]:
    """The hosts a service answers: ``names``, ``any_address`` (``host`` is every
    interface), ``any`` (allowed_hosts "*")."""
    given: list[Any] = []
    if isinstance(allowed, str):
        given = [allowed]
    elif isinstance(allowed, (list, tuple)):
        given = list(allowed)
    named = [host_name(str(a)) for a in given]
    wildcard = host in ("0.0.0.0", "::")
    names = ["localhost"]
    if host is not None and not wildcard:
        names.append(host_name(host))
    names += [name for name in named if name != "*"]
    return {"names": list(dict.fromkeys(names)), "any_address": wildcard, "any": "*" in named}


def is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or re.fullmatch(r"127(\.[0-9]{1,3}){3}", host) is not None


def _is_address(name: str) -> bool:
    return bool(
        re.fullmatch(r"[0-9]{1,3}(\.[0-9]{1,3}){3}", name)
        or (":" in name and re.fullmatch(r"[0-9a-f:.]+", name))
    )


def host_allowed(name: str, hosts: Mapping[str, Any]) -> bool:
    return (
        hosts["any"]
        or name in hosts["names"]
        or is_loopback(name)
        or (hosts["any_address"] and _is_address(name))
    )


def hosts_text(hosts: Mapping[str, Any]) -> str:
    rest = "this machine's addresses" if hosts["any_address"] else "loopback addresses"
    return f"{', '.join(hosts['names'])} and {rest}"


def too_large(max_bytes: int) -> dict[str, Any]:
    """The refusal of a body over ``max_bytes``: its JSON problem, naming the limit."""
    size = float(max_bytes)
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            said = f"{size / scale:.1f} {unit}"
            break
    else:
        said = f"{size:.0f} B"
    message = (
        f"The body is over {said}; this service takes at most that ({max_bytes} bytes, "
        "max_bytes) per request: send the rows in parts."
    )
    return {"error": "too_large", "message": message, "limit": "max_bytes", "max_bytes": max_bytes}


def _text(value: str) -> str:
    """A header as text: bytes that are not UTF-8 as "?" (headers arrive as latin-1)."""
    try:
        return value.encode("latin-1").decode("utf-8", "replace").replace("\ufffd", "?")
    except UnicodeEncodeError:
        return value


def check_request(served: Served, headers: Mapping[str, str], token: bool, json: bool) -> None:
    """The header checks in their order (see the module's contract); ``token``: the route
    needs the token; ``json``: a POST of JSON."""
    hosts = served.hosts
    given = headers.get("host")
    if given is not None and not host_allowed(host_name(_text(given)), hosts):
        given = _text(given)
        refuse(
            403,
            "forbidden_host",
            f"This service answers requests for {hosts_text(hosts)}, not for "
            f'"{client_text(given, 60)}": a web page may be reaching it under its own name (DNS '
            f"rebinding). If clients use that name, start the service with allowed_hosts = "
            f'"{client_text(host_name(given), 60)}".',
        )
    origin = headers.get("origin")
    if origin is not None:
        origin = _text(origin)
        site = re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*://([^/?#@]+)", origin)
        if not (site and host_allowed(host_name(site.group(1)), hosts)):
            refuse(
                403,
                "forbidden_origin",
                f'This service does not answer web pages of other sites (Origin: "'
                f'{client_text(origin, 60)}"); it answers pages of {hosts_text(hosts)}.',
            )
    secret = served.settings.get("token")
    if token and secret is not None:
        sent = headers.get("authorization", "")
        if not hmac.compare_digest(sent.encode("utf-8", "replace"), f"Bearer {secret}".encode()):
            refuse(
                401,
                "unauthorized",
                "The bearer token is wrong."
                if sent
                else "This service needs a token: send the header `Authorization: Bearer <token>`.",
            )
    if json:
        kind = _text(headers.get("content-type", ""))
        if kind.split(";")[0].strip().lower() != "application/json":
            said = f', not "{client_text(kind, 60)}"' if kind else ""
            refuse(
                415,
                "not_json",
                f"POST /predict takes a JSON body: send the header `Content-Type: "
                f"application/json`{said}.",
            )
    length = headers.get("content-length", "")
    if not length:
        if "transfer-encoding" in headers:
            refuse(
                411,
                "length_required",
                "Send the body with a `Content-Length` header (this service takes no chunked "
                "bodies).",
            )
        return
    if length.strip().isdigit() and int(length) > served.max_bytes:
        problem = too_large(served.max_bytes)
        raise Refused(413, problem)
