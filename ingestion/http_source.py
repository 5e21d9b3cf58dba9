"""An allow-listed JSON search endpoint as a fallback source, hardened against SSRF.

`HttpFallbackSource` is written against SSRF: the request host must be allow-listed, every
redirect hop is checked the same way, the resolved addresses must be public unless the
source is explicitly marked `allow_private` (cloud metadata and link-local addresses stay
refused even then), IPv6 addresses that carry an IPv4 one (mapped, 6to4, Teredo, NAT64) are
judged by it too, and the connection goes to the address that was checked (no second DNS
lookup that could be rebound). Responses are size- and
time-capped. Errors never quote the query. Which sources a question may reach is decided
in crag/fallback.py.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote_plus, urljoin, urlsplit

import httpcore
import httpx

from crag.fallback import FallbackError
from crag.types import Passage

MAX_REDIRECTS = 3
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_PENDING_LOOKUPS = 8
_LOOKUP_SLOTS = threading.BoundedSemaphore(MAX_PENDING_LOOKUPS)
# Everything httpcore raises for a failed exchange (it has no common base class).
HTTPCORE_ERRORS = (
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    httpcore.TimeoutException,
)


# --- field map -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldMap:
    """Where results live in a source's JSON answer.

    `results` is the dotted path of the result list ("" for a top-level list); `title`,
    `url` and `text` are dotted paths inside one result. Paths may index lists
    ("snippets[0]"), and the full form "data.hits[].title" is accepted too: the part
    before "[]" must then be the results path.
    """

    results: str = "results"
    title: str = "title"
    url: str = "url"
    text: str = "text"

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, str]) -> FieldMap:
        """Build from {"results": ..., "title": "results[].title", ...}; missing keys default."""
        unknown = set(mapping) - {"results", "title", "url", "text"}
        if unknown:
            raise ValueError(f"unknown field map keys: {sorted(unknown)}")
        results = mapping.get("results")
        items: dict[str, str] = {}
        for key in ("title", "url", "text"):
            if key not in mapping:
                continue
            path = mapping[key]
            if "[]" in path:
                list_path, _, item_path = path.partition("[]")
                list_path, item_path = list_path.rstrip("."), item_path.lstrip(".")
                if results is not None and results != list_path:
                    raise ValueError(f"field {key!r} path {path!r} is not under results path {results!r}")
                results = list_path
                path = item_path
            items[key] = path
        return cls(results=results if results is not None else cls.results, **items)


_PATH_PART = re.compile(r"^(?P<key>[^\[\]]*)(?P<indexes>(?:\[\d+\])*)$")


def _get_path(data: Any, path: str) -> Any:
    """Follow a dotted path like "a.b[0].c"; None when any step is missing."""
    if path == "":
        return data
    current = data
    for part in path.split("."):
        match = _PATH_PART.match(part)
        if match is None:
            raise FallbackError(f"invalid field path {path!r}")
        if match["key"]:
            if not isinstance(current, dict) or match["key"] not in current:
                return None
            current = current[match["key"]]
        for index in re.findall(r"\[(\d+)\]", match["indexes"]):
            if not isinstance(current, list) or int(index) >= len(current):
                return None
            current = current[int(index)]
    return current


def _as_text(value: Any) -> str:
    """Strings as they are, lists of strings joined (e.g. highlight snippets)."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        return " ".join(v.strip() for v in value if isinstance(v, str) and v.strip())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return ""


# --- HTTP source ------------------------------------------------------------------------------


@dataclass
class HttpSourceConfig:
    """An admin-registered HTTP search endpoint (an intranet wiki, a policy portal...)."""

    name: str
    url: str
    allowed_hosts: list[str] = field(default_factory=list)  # empty: the url's own host
    query_template: str = "{url}?q={keywords}&limit={n}"
    field_map: FieldMap = field(default_factory=FieldMap)
    timeout_s: float = 3.0
    max_bytes: int = 1_000_000
    allow_private: bool = False  # explicit opt-in for intranet addresses (10/8, loopback...), never metadata
    open_web: bool = False  # a public web search; never used for policy questions

    def __post_init__(self) -> None:
        host = urlsplit(self.url).hostname
        if urlsplit(self.url).scheme not in ("http", "https") or not host:
            raise ValueError(f"source {self.name!r}: url must be an absolute http(s) URL")
        try:  # the parser requests are made with: a bad port or host name fails here, not at question time
            valid = bool(httpx.URL(self.url).host)
        except (httpx.InvalidURL, ValueError) as error:
            raise ValueError(f"source {self.name!r}: url is not a valid URL ({error})") from None
        if not valid:
            raise ValueError(f"source {self.name!r}: url is not a valid URL (no host)")
        if not self.allowed_hosts:
            self.allowed_hosts = [host]
        self.allowed_hosts = [h.strip().lower().rstrip(".") for h in self.allowed_hosts]
        for allowed in self.allowed_hosts:  # refused at every request anyway: say so when it is registered
            if _never_dialled(allowed):
                raise ValueError(
                    f"source {self.name!r}: {allowed!r} is a cloud metadata or link-local host, never allowed"
                )
        try:
            self.query_template.format(url=self.url, keywords="k", n=1)
        except (KeyError, IndexError, ValueError) as error:
            raise ValueError(f"source {self.name!r}: bad query_template ({error})") from None
        if self.timeout_s <= 0 or self.max_bytes <= 0:
            raise ValueError(f"source {self.name!r}: timeout_s and max_bytes must be positive")


@dataclass(frozen=True)
class _Target:
    """A checked request target: the URL as written and the vetted addresses to dial."""

    url: httpx.URL
    addresses: list[str]


class HttpFallbackSource:
    """Queries an allow-listed JSON search endpoint with the redacted keyword query."""

    kind: Literal["collection", "http"] = "http"

    def __init__(self, config: HttpSourceConfig) -> None:
        self.config = config
        self.name = config.name
        self.open_web = config.open_web

    def request_url(self, keywords: str, limit: int) -> str:
        """The exact URL a search sends (callers log this as "what was sent")."""
        return self.config.query_template.format(url=self.config.url, keywords=quote_plus(keywords), n=int(limit))

    def search(self, keywords: str, limit: int) -> list[Passage]:
        if limit <= 0:
            return []
        body = self._fetch(self.request_url(keywords, limit))
        try:
            data = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise self._error("returned a response that is not JSON") from None
        except RecursionError:  # "[[[[..." nested past Python's limit: refuse, don't fail the question
            raise self._error("returned JSON nested too deeply to read") from None
        return self._passages(data, limit)

    # -- request --------------------------------------------------------------------------

    def _fetch(self, url: str) -> bytes:
        deadline = time.monotonic() + self.config.timeout_s  # one time budget for all hops
        # A redirect may not lead to another service on an allowed host (an admin port, a
        # metrics endpoint): only the source's own port, or the scheme's standard one.
        ports = {_port_of(httpx.URL(self.config.url)), 80, 443}
        # httpcore rather than an httpx client, for its network backend: the deadline has to
        # bound every read, not each read on its own. No proxy or .netrc is consulted either.
        with httpcore.ConnectionPool(network_backend=_DeadlineBackend(deadline), max_connections=1) as pool:
            for _ in range(MAX_REDIRECTS + 1):
                try:
                    port = _port_of(httpx.URL(url))
                    if port not in ports:
                        raise self._error(
                            f"refused a redirect to port {port}: only the source's own port (or 80/443) is allowed"
                        )
                    target = self._check_target(url, deadline)
                except (httpx.InvalidURL, ValueError):  # a bad port, IPv6 or IDNA host, from a redirect Location
                    raise self._error("sent a redirect to a malformed URL") from None
                response = self._open(pool, target)
                try:
                    location = _header(response, "location")
                    if response.status in REDIRECT_STATUSES and location:  # followed by hand, so each hop is checked
                        try:
                            url = urljoin(str(target.url), location)
                        except ValueError:
                            raise self._error("sent a redirect to a malformed URL") from None
                        continue
                    if not 200 <= response.status < 300:
                        raise self._error(f"answered HTTP {response.status}")
                    return self._read_capped(response)
                finally:
                    response.close()
        raise self._error(f"redirected more than {MAX_REDIRECTS} times")

    def _check_target(self, url: str, deadline: float) -> _Target:
        """Refuse off-list hosts and non-public addresses before any byte is sent."""
        parsed = httpx.URL(url)
        host = (parsed.host or "").lower().rstrip(".")
        if parsed.scheme not in ("http", "https"):
            raise self._error(f"refused a non-http(s) URL scheme {parsed.scheme!r}")
        if host not in self.config.allowed_hosts:
            raise self._error(f"refused host {host!r}: not in the source's allowed hosts")
        if host.strip("[]") in METADATA_HOSTS:
            raise self._error(f"refused host {host!r}: a cloud metadata service")
        addresses = self._resolve(host, _port_of(parsed), deadline)
        for address in addresses:
            if _never_dialled(address):
                raise self._error(
                    f"refused host {host!r}: it resolves to {address}, a cloud metadata or link-local "
                    "address (refused even for a source that allows private addresses)"
                )
            if not self.config.allow_private and not _is_public_address(address):
                raise self._error(f"refused host {host!r}: it resolves to a non-public address {address}")
        return _Target(url=parsed, addresses=addresses)

    def _resolve(self, host: str, port: int, deadline: float) -> list[str]:
        # getaddrinfo has no timeout of its own: wait for it only until the deadline. A hung
        # lookup is left to its daemon thread until the system resolver gives up.
        infos: list[Any] = []
        failures: list[OSError] = []

        slots = _LOOKUP_SLOTS

        def lookup() -> None:
            try:
                infos.extend(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
            except OSError as error:
                failures.append(error)
            finally:
                slots.release()

        # At most MAX_PENDING_LOOKUPS threads wait on a hung resolver; past that, a question
        # waits for a free one until its deadline instead of adding threads.
        if not slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise self._timed_out(f" resolving {host!r}")
        resolver = threading.Thread(target=lookup, name="fallback-dns", daemon=True)
        try:
            resolver.start()
        except RuntimeError:  # no thread to be had: free the slot, or it is lost for good
            slots.release()
            raise self._error(f"could not start a name lookup for {host!r}") from None
        resolver.join(max(0.0, deadline - time.monotonic()))
        if resolver.is_alive():
            raise self._timed_out(f" resolving {host!r}")
        if failures:
            raise self._error(f"could not resolve host {host!r}")
        addresses: list[str] = []
        for info in infos:
            address = str(info[4][0]).split("%")[0]  # drop an IPv6 zone id
            if address not in addresses:
                addresses.append(address)
        if not addresses:
            raise self._error(f"could not resolve host {host!r}")
        return addresses

    def _open(self, pool: httpcore.ConnectionPool, target: _Target) -> httpcore.Response:
        """Connect to a vetted address (no fresh lookup), sending the original Host and SNI."""
        headers = [
            ("Host", target.url.netloc.decode("ascii")),
            ("Accept", "application/json"),
            # Uncompressed only: a few KB of gzip can inflate to gigabytes before a size check.
            ("Accept-Encoding", "identity"),
        ]
        # TLS still verifies the certificate against the real host name via SNI.
        extensions = {"sni_hostname": target.url.host} if target.url.scheme == "https" else {}
        reason = ""
        for address in target.addresses:
            request = httpcore.Request(
                "GET", str(target.url.copy_with(host=address)), headers=headers, extensions=extensions
            )
            try:
                return pool.handle_request(request)  # streams: the body is read by _read_capped
            except httpcore.TimeoutException:
                raise self._timed_out() from None
            except httpcore.ConnectError as error:
                reason = str(error)  # refused, unreachable, or a TLS certificate that is not trusted
                continue  # try the next vetted address, as a normal client would
            except HTTPCORE_ERRORS as error:
                raise self._error(f"request failed ({type(error).__name__})") from None
        raise self._error(f"could not connect to host {target.url.host!r}" + (f": {reason}" if reason else ""))

    def _read_capped(self, response: httpcore.Response) -> bytes:
        """Read the body, refusing anything past max_bytes (the deadline bounds every read)."""
        limit = self.config.max_bytes
        declared = _header(response, "content-length")
        if declared.isdigit() and int(declared) > limit:
            raise self._error(f"response of {declared} bytes exceeds the {limit}-byte cap")
        encoding = _header(response, "content-encoding").strip().lower() or "identity"
        if encoding != "identity":
            raise self._error(f"sent a {encoding!r}-encoded response although only uncompressed ones are accepted")
        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in response.iter_stream():
                size += len(chunk)
                if size > limit:
                    raise self._error(f"response exceeds the {limit}-byte cap")
                chunks.append(chunk)
        except httpcore.TimeoutException:
            raise self._timed_out() from None
        except HTTPCORE_ERRORS as error:
            raise self._error(f"reading the response failed ({type(error).__name__})") from None
        return b"".join(chunks)

    # -- results --------------------------------------------------------------------------

    def _passages(self, data: Any, limit: int) -> list[Passage]:
        fields = self.config.field_map
        results = _get_path(data, fields.results)
        if not isinstance(results, list):
            raise self._error(f"response has no result list at {fields.results or '<top level>'!r}")
        passages: list[Passage] = []
        for item in results:
            text = _as_text(_get_path(item, fields.text))
            if not text:
                continue  # nothing to cite
            title = _as_text(_get_path(item, fields.title))
            url = _as_text(_get_path(item, fields.url))
            safe_url = url if urlsplit(url).scheme in ("http", "https") else None
            passages.append(
                Passage(
                    id=_result_id(self.name, safe_url, title, text),
                    text=text,
                    origin="fallback",
                    source=self.name,
                    document=title,
                    title=title,
                    url=safe_url,
                    position=len(passages),
                )
            )
            if len(passages) >= limit:
                break
        return passages

    def _error(self, problem: str) -> FallbackError:
        return FallbackError(f"fallback source {self.name!r} {problem}")

    def _timed_out(self, while_doing: str = "") -> FallbackError:
        return self._error(f"timed out after {self.config.timeout_s:g}s{while_doing}")


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud metadata services hand out the machine's credentials: never asked, whatever a source
# allows. AWS (IPv4 and IPv6), GCP, Azure, Oracle and DigitalOcean use 169.254.169.254 (any
# link-local address is refused too); Alibaba 100.100.100.200; Azure's wire server 168.63.129.16.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200", "168.63.129.16")
)
METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata.goog"})
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052: the last 32 bits are the IPv4 address
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated "::a.b.c.d"


def _addresses_reached(address: str) -> list[IPAddress]:
    """What traffic to `address` reaches, each of which must pass the checks: an IPv6 address that
    carries IPv4 ones (IPv4-mapped, 6to4, Teredo server and client, NAT64) is judged by those alone
    (Python counts 6to4 as global and the others as reserved or private, whatever they carry); a
    deprecated IPv4-compatible one ("::a.b.c.d") by both."""
    ip = ipaddress.ip_address(address.strip("[]").split("%")[0])
    if not isinstance(ip, ipaddress.IPv6Address):
        return [ip]
    last_32_bits = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    carried: list[IPAddress] = [embedded for embedded in (ip.ipv4_mapped, ip.sixtofour) if embedded is not None]
    carried += [*(ip.teredo or ()), *([last_32_bits] if ip in _NAT64 else [])]
    if carried:
        return carried
    if ip in _IPV4_COMPATIBLE and int(ip) > 1:  # not "::" or "::1"
        return [ip, last_32_bits]
    return [ip]


def _never_dialled(host: str) -> bool:
    """Whether `host` (a name or an address) is a cloud metadata service or a link-local address."""
    if host.strip("[]") in METADATA_HOSTS:
        return True
    try:
        reached = _addresses_reached(host)
    except ValueError:
        return False  # a name: judged by the addresses it resolves to
    return any(ip in METADATA_ADDRESSES or ip.is_link_local for ip in reached)


def _is_public_address(address: str) -> bool:
    """Globally routable unicast only: no private, loopback, link-local, site-local, reserved,
    multicast, here or in an IPv4 address it carries."""
    return all(_is_public(ip) for ip in _addresses_reached(address))


def _is_public(ip: IPAddress) -> bool:
    # Python 3.11 counts fec0::/10 (site-local, deprecated but routed inside sites) as global.
    site_local = isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local
    special = ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_reserved or site_local
    return ip.is_global and not (special or ip.is_multicast or ip.is_unspecified)


def _port_of(url: httpx.URL) -> int:
    return url.port or (443 if url.scheme == "https" else 80)


def _header(response: httpcore.Response, name: str) -> str:
    wanted = name.encode("ascii").lower()
    for key, value in response.headers:
        if key.lower() == wanted:
            try:
                return value.decode("utf-8")  # what servers send in practice (a raw UTF-8 Location)
            except UnicodeDecodeError:
                return value.decode("latin-1")  # HTTP's historical charset
    return ""


def _time_left(deadline: float, timeout: float | None, expired: type[httpcore.TimeoutException]) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise expired("the request's time budget is spent")
    return left if timeout is None else min(timeout, left)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's own sockets, with every connect, read and write given at most the time left.

    A timeout per operation alone lets a server that sends its headers a byte at a time
    hold a request for as long as it likes; one deadline for the whole request does not.
    """

    def __init__(self, deadline: float) -> None:
        self._sockets = httpcore.SyncBackend()
        self._deadline = deadline

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        budget = _time_left(self._deadline, timeout, httpcore.ConnectTimeout)
        stream = self._sockets.connect_tcp(host, port, budget, local_address, socket_options)
        return _DeadlineStream(stream, self._deadline)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        raise httpcore.UnsupportedProtocol("fallback sources are reached over TCP only")

    def sleep(self, seconds: float) -> None:
        self._sockets.sleep(seconds)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream, deadline: float) -> None:
        self._stream = stream
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _time_left(self._deadline, timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _time_left(self._deadline, timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        try:
            budget = _time_left(self._deadline, timeout, httpcore.ConnectTimeout)
        except httpcore.ConnectTimeout:
            self._stream.close()  # httpcore closes only streams it was handed back
            raise
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, budget), self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


def _result_id(source: str, url: str | None, title: str, text: str) -> str:
    """Stable id for a fallback result, so repeated results dedupe in refinement."""
    digest = hashlib.sha1(f"{url or ''}\n{title}\n{text}".encode()).hexdigest()[:16]
    return f"{source}:{digest}"
