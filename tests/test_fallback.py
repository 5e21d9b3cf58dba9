"""Fallback sources against a real local HTTP server (127.0.0.1, random port)."""

import gzip
import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from crag.fallback import ActionPolicy, FallbackError, SourceRule, classify_question
from ingestion.http_source import FieldMap, HttpFallbackSource, HttpSourceConfig

SEARCH_RESULTS = {
    "results": [
        {"title": "Travel policy", "url": "https://wiki.example/travel", "text": "Submit within 30 days."},
        {"title": "Empty", "url": "https://wiki.example/empty", "text": ""},
        {"title": "Leave policy", "url": "javascript:alert(1)", "text": "Eligible staff get 25 days."},
        {"title": "Laptops", "url": "https://wiki.example/laptops", "text": "Laptops are replaced every 3 years."},
    ]
}

CUSTOM_RESULTS = {
    "data": {
        "hits": [
            {"name": "Expenses FAQ", "link": "https://faq.example/1", "body": {"snippets": ["Receipts", "over $25."]}},
            {"name": "Per diem", "link": "https://faq.example/2", "body": {"snippets": ["$75 per day."]}},
        ]
    }
}


@dataclass
class Recorded:
    path: str
    query: dict[str, list[str]]
    host_header: str


@dataclass
class LocalServer:
    port: int
    requests: list[Recorded] = field(default_factory=list)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]


def _make_handler(server_state: LocalServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            server_state.requests.append(Recorded(parts.path, parse_qs(parts.query), self.headers.get("Host", "")))
            route = {
                "/search": lambda: self._json(SEARCH_RESULTS),
                "/web-search": lambda: self._json(SEARCH_RESULTS),
                "/custom": lambda: self._json(CUSTOM_RESULTS),
                "/redirect-off": lambda: self._redirect("http://offlist.example/search"),
                "/redirect-on": lambda: self._redirect("/search?q=again"),
                "/redirect-loop": lambda: self._redirect("/redirect-loop"),
                "/redirect-port": lambda: self._redirect("http://127.0.0.1:1/admin"),
                "/redirect-bad-ipv6": lambda: self._redirect("http://[::1/search"),
                "/redirect-bad-port": lambda: self._redirect("http://127.0.0.1:abc/search"),
                "/redirect-bad-idna": lambda: self._redirect("http://xn--/search"),
                "/redirect-utf8": lambda: self._raw_redirect("/s\u00e9arch".encode()),
                "/s%C3%A9arch": lambda: self._json(SEARCH_RESULTS),
                "/big-declared": lambda: self._body(b"x" * 5000, "application/json"),
                "/big-streamed": self._big_streamed,
                "/slow": self._slow,
                "/drip": self._drip,
                "/drip-headers": self._drip_headers,
                "/html": lambda: self._body(b"<html><body>Login</body></html>", "text/html"),
                "/error": lambda: self._body(b"{}", "application/json", status=500),
                "/no-list": lambda: self._json({"items": []}),
                "/gzip-bomb": self._gzip_bomb,
                "/deep-json": lambda: self._body(b"[" * 200_000 + b"]" * 200_000, "application/json"),
            }.get(parts.path)
            if route is None:
                self._body(b"not found", "text/plain", status=404)
            else:
                route()

        def _body(self, body: bytes, content_type: str, status: int = 200) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, data: object) -> None:
            self._body(json.dumps(data).encode(), "application/json")

        def _redirect(self, location: str) -> None:
            self.send_response(302)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _raw_redirect(self, location: bytes) -> None:
            # send_header would insist on Latin-1; servers do send raw UTF-8 here.
            self.wfile.write(b"HTTP/1.1 302 Found\r\nLocation: " + location + b"\r\nContent-Length: 0\r\n\r\n")

        def _big_streamed(self) -> None:
            # No Content-Length: the body runs until the connection closes (HTTP/1.0).
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            for _ in range(50):
                self.wfile.write(b" " * 1000)

        def _gzip_bomb(self) -> None:
            # 50 MB of zeros, gzipped twice: about 5 KB on the wire. Sent whatever the client accepts.
            body = gzip.compress(gzip.compress(b"\0" * 50_000_000))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Encoding", "gzip, gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _slow(self) -> None:
            time.sleep(2.0)
            self._json(SEARCH_RESULTS)

        def _drip(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            for _ in range(40):  # each chunk arrives well within a read timeout
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.05)

        def _drip_headers(self) -> None:
            # The status line and headers a byte at a time: no single read ever times out.
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Padding: " + b"x" * 60
            for byte in head:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.05)

    return Handler


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (timeout, size cap) breaks the pipe: expected here


@pytest.fixture
def server() -> Iterator[LocalServer]:
    state = LocalServer(port=0)
    http_server = QuietServer(("127.0.0.1", 0), _make_handler(state))
    state.port = http_server.server_address[1]
    thread = threading.Thread(target=http_server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield state
    http_server.shutdown()
    http_server.server_close()


def local_source(server: LocalServer, path: str = "/search", **overrides: Any) -> HttpFallbackSource:
    fields: dict[str, Any] = dict(name="intranet-wiki", url=server.url(path), allow_private=True)
    fields.update(overrides)
    return HttpFallbackSource(HttpSourceConfig(**fields))


# --- results -------------------------------------------------------------------------------------


def test_results_parsed_with_the_default_field_map(server: LocalServer) -> None:
    passages = local_source(server).search("travel expenses", limit=5)

    assert [p.title for p in passages] == ["Travel policy", "Leave policy", "Laptops"]  # empty text skipped
    first = passages[0]
    assert first.origin == "fallback"
    assert first.source == "intranet-wiki"
    assert first.document == "Travel policy"
    assert first.url == "https://wiki.example/travel"
    assert first.text == "Submit within 30 days."
    assert passages[1].url is None  # a non-http(s) link is never passed on
    assert len({p.id for p in passages}) == 3
    assert server.requests[0].query == {"q": ["travel expenses"], "limit": ["5"]}


def test_results_are_capped_at_the_limit(server: LocalServer) -> None:
    assert [p.title for p in local_source(server).search("travel", limit=1)] == ["Travel policy"]
    assert local_source(server).search("travel", limit=0) == []
    assert len(server.requests) == 1  # limit 0 sends nothing


def test_results_parsed_with_a_custom_field_map(server: LocalServer) -> None:
    field_map = FieldMap(results="data.hits", title="name", url="link", text="body.snippets")
    passages = local_source(server, "/custom", field_map=field_map).search("receipts", limit=5)
    assert [(p.title, p.url, p.text) for p in passages] == [
        ("Expenses FAQ", "https://faq.example/1", "Receipts over $25."),
        ("Per diem", "https://faq.example/2", "$75 per day."),
    ]


def test_field_map_accepts_the_bracket_syntax(server: LocalServer) -> None:
    field_map = FieldMap.from_mapping(
        {"title": "data.hits[].name", "url": "data.hits[].link", "text": "data.hits[].body.snippets[0]"}
    )
    assert field_map == FieldMap(results="data.hits", title="name", url="link", text="body.snippets[0]")
    passages = local_source(server, "/custom", field_map=field_map).search("receipts", limit=5)
    assert [p.text for p in passages] == ["Receipts", "$75 per day."]


def test_field_map_rejects_paths_outside_the_results_list() -> None:
    with pytest.raises(ValueError, match="not under results path"):
        FieldMap.from_mapping({"results": "data.hits", "title": "other[].name"})


def test_a_missing_result_list_is_an_error(server: LocalServer) -> None:
    with pytest.raises(FallbackError, match="no result list at 'results'"):
        local_source(server, "/no-list").search("travel", limit=5)


def test_custom_query_template(server: LocalServer) -> None:
    source = local_source(server, query_template="{url}?query={keywords}&size={n}&lang=en")
    assert source.request_url("per diem", 3) == server.url("/search") + "?query=per+diem&size=3&lang=en"
    source.search("per diem", limit=3)
    assert server.requests[0].query == {"query": ["per diem"], "size": ["3"], "lang": ["en"]}


# --- allow-list, redirects and addresses -------------------------------------------------------------


def test_off_list_host_is_refused_before_any_request(server: LocalServer) -> None:
    source = local_source(server, allowed_hosts=["intranet.example"])
    with pytest.raises(FallbackError, match="refused host '127.0.0.1': not in the source's allowed hosts"):
        source.search("travel", limit=5)
    assert server.requests == []


def test_a_query_template_cannot_point_elsewhere(server: LocalServer) -> None:
    source = local_source(server, query_template="http://offlist.example/?q={keywords}")
    with pytest.raises(FallbackError, match="refused host 'offlist.example'"):
        source.search("travel", limit=5)
    assert server.requests == []


def test_redirect_to_an_off_list_host_is_refused(server: LocalServer) -> None:
    with pytest.raises(FallbackError, match="refused host 'offlist.example'"):
        local_source(server, "/redirect-off").search("travel", limit=5)
    assert server.paths() == ["/redirect-off"]


def test_redirect_within_the_allow_list_is_followed(server: LocalServer) -> None:
    passages = local_source(server, "/redirect-on").search("travel", limit=5)
    assert len(passages) == 3
    assert server.paths() == ["/redirect-on", "/search"]


def test_redirect_loops_stop(server: LocalServer) -> None:
    with pytest.raises(FallbackError, match="redirected more than 3 times"):
        local_source(server, "/redirect-loop").search("travel", limit=5)
    assert server.paths() == ["/redirect-loop"] * 4


def test_loopback_is_refused_unless_private_addresses_are_allowed(server: LocalServer) -> None:
    with pytest.raises(FallbackError, match="non-public address 127.0.0.1"):
        local_source(server, allow_private=False).search("travel", limit=5)
    assert server.requests == []

    assert len(local_source(server, allow_private=True).search("travel", limit=5)) == 3
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "host",
    [
        "[2002:7f00:1::1]",  # 6to4 of 127.0.0.1: Python counts 2002::/16 as global
        "[fec0::1]",  # site-local: Python 3.11 counts it as global
        "[64:ff9b::a00:1]",  # NAT64 of 10.0.0.1
        "[2001:0:4136:e378:8000:63bf:f5ff:fffe]",  # Teredo, client 10.0.0.1
        "[::ffff:192.168.1.1]",
    ],
)
def test_ipv6_addresses_that_carry_private_ones_are_refused_before_any_connection(host: str) -> None:
    source = HttpFallbackSource(HttpSourceConfig(name="wiki", url=f"http://{host}:8080/search", timeout_s=1.0))
    with pytest.raises(FallbackError, match="non-public address"):
        source.search("travel", limit=5)


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/latest/",
        "http://100.100.100.200/latest/meta-data/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://[::ffff:169.254.169.254]/",
        "http://[2002:a9fe:a9fe::1]/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://169.254.10.1/",
        "http://[fe80::1]/",
    ],
)
def test_cloud_metadata_and_link_local_hosts_are_refused_even_when_private_addresses_are_allowed(url: str) -> None:
    with pytest.raises(ValueError, match="cloud metadata or link-local host, never allowed"):
        HttpSourceConfig(name="wiki", url=url, allow_private=True)
    with pytest.raises(ValueError, match="never allowed"):  # nor as a host redirects may lead to
        HttpSourceConfig(
            name="wiki",
            url="http://10.0.0.1/search",
            allowed_hosts=["10.0.0.1", urlsplit(url).hostname or ""],
            allow_private=True,
        )


def test_a_name_that_resolves_to_a_metadata_address_is_refused_even_when_private_addresses_are_allowed(
    monkeypatch,
) -> None:
    # No real name resolves to 169.254.169.254 offline, so the resolver alone is stood in for.
    import ingestion.http_source

    def resolve(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        assert host == "wiki.corp.example"
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::ffff:169.254.169.254", port, 0, 0)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port)),
        ]

    monkeypatch.setattr(ingestion.http_source.socket, "getaddrinfo", resolve)
    source = HttpFallbackSource(
        HttpSourceConfig(name="wiki", url="http://wiki.corp.example/search", allow_private=True)
    )
    with pytest.raises(
        FallbackError, match=r"resolves to ::ffff:169.254.169.254, a cloud metadata or link-local address"
    ):
        source.search("travel", limit=5)


def _localhost_resolves() -> bool:
    try:
        return any(info[4][0] == "127.0.0.1" for info in socket.getaddrinfo("localhost", 80))
    except socket.gaierror:
        return False


@pytest.mark.skipif(not _localhost_resolves(), reason="localhost does not resolve to 127.0.0.1 here")
def test_the_checked_address_is_dialled_with_the_original_host_header(server: LocalServer) -> None:
    source = local_source(server, url=server.url("/search", host="localhost"))
    assert source.config.allowed_hosts == ["localhost"]
    assert len(source.search("travel", limit=5)) == 3
    assert server.requests[0].host_header == f"localhost:{server.port}"


# --- size, time and format ---------------------------------------------------------------------------


def test_declared_oversize_response_is_refused(server: LocalServer) -> None:
    with pytest.raises(FallbackError, match="5000 bytes exceeds the 1000-byte cap"):
        local_source(server, "/big-declared", max_bytes=1000).search("travel", limit=5)


def test_streamed_oversize_response_is_cut_off(server: LocalServer) -> None:
    with pytest.raises(FallbackError, match="exceeds the 10000-byte cap"):
        local_source(server, "/big-streamed", max_bytes=10_000).search("travel", limit=5)
    # Under the cap the same body is read in full (and is not JSON: only spaces).
    with pytest.raises(FallbackError, match="not JSON"):
        local_source(server, "/big-streamed", max_bytes=100_000).search("travel", limit=5)


def test_slow_server_times_out(server: LocalServer) -> None:
    started = time.monotonic()
    with pytest.raises(FallbackError, match=r"timed out after 0.3s"):
        local_source(server, "/slow", timeout_s=0.3).search("travel", limit=5)
    assert time.monotonic() - started < 1.5


def test_a_dripping_server_hits_the_overall_time_budget(server: LocalServer) -> None:
    started = time.monotonic()
    with pytest.raises(FallbackError, match="timed out"):
        local_source(server, "/drip", timeout_s=0.5).search("travel", limit=5)
    assert time.monotonic() - started < 1.5


def test_a_server_dripping_its_headers_hits_the_overall_time_budget(server: LocalServer) -> None:
    started = time.monotonic()
    with pytest.raises(FallbackError, match=r"timed out after 0.5s"):
        local_source(server, "/drip-headers", timeout_s=0.5).search("travel", limit=5)
    assert time.monotonic() - started < 1.5


@pytest.fixture
def hung_resolver(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Name lookups of the returned host hang until the test ends. No resolver here can be
    made slow on demand, so the lookup itself stands in for one."""
    host, release = "wiki.corp.example", threading.Event()
    real_getaddrinfo = socket.getaddrinfo

    def hanging_getaddrinfo(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == host:
            release.wait(10)
        return real_getaddrinfo(name, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", hanging_getaddrinfo)
    yield host
    release.set()


def test_a_hanging_name_lookup_hits_the_time_budget(hung_resolver: str) -> None:
    source = HttpFallbackSource(HttpSourceConfig(name="wiki", url=f"http://{hung_resolver}/search", timeout_s=0.5))
    started = time.monotonic()
    with pytest.raises(
        FallbackError, match=r"fallback source 'wiki' timed out after 0.5s resolving 'wiki.corp.example'"
    ):
        source.search("travel", limit=5)
    assert time.monotonic() - started < 1.5


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[LocalServer, Path]]:
    """The same handler over HTTPS, with a fresh self-signed certificate for 127.0.0.1."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    state = LocalServer(port=0)
    http_server = QuietServer(("127.0.0.1", 0), _make_handler(state))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    http_server.socket = context.wrap_socket(http_server.socket, server_side=True)
    state.port = http_server.server_address[1]
    thread = threading.Thread(target=http_server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield state, cert
    http_server.shutdown()
    http_server.server_close()


def test_https_verifies_the_certificate(tls_server: tuple[LocalServer, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    server, cert = tls_server
    url = f"https://127.0.0.1:{server.port}/search"
    with pytest.raises(FallbackError, match="could not connect to host '127.0.0.1': .*CERTIFICATE_VERIFY_FAILED"):
        HttpFallbackSource(HttpSourceConfig(name="intranet-wiki", url=url, allow_private=True)).search(
            "travel", limit=5
        )
    # Trusted the standard way (a company CA in SSL_CERT_FILE), the same server answers.
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    passages = HttpFallbackSource(HttpSourceConfig(name="intranet-wiki", url=url, allow_private=True)).search(
        "travel", limit=5
    )
    assert [p.title for p in passages] == ["Travel policy", "Leave policy", "Laptops"]
    assert server.requests[-1].host_header == f"127.0.0.1:{server.port}"


@pytest.mark.parametrize("path", ["/redirect-bad-ipv6", "/redirect-bad-port", "/redirect-bad-idna"])
def test_a_malformed_redirect_is_a_source_error(server: LocalServer, path: str) -> None:
    with pytest.raises(FallbackError, match="fallback source 'intranet-wiki' sent a redirect to a malformed URL"):
        local_source(server, path).search("travel", limit=5)


def test_a_utf8_redirect_location_is_followed_as_sent(server: LocalServer) -> None:
    passages = local_source(server, "/redirect-utf8").search("travel", limit=5)
    assert passages and server.paths()[-1] == "/s%C3%A9arch"


def test_hung_name_lookups_hold_a_bounded_number_of_threads(
    hung_resolver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ingestion import http_source as fallback

    monkeypatch.setattr(fallback, "_LOOKUP_SLOTS", threading.BoundedSemaphore(2))
    before = {thread for thread in threading.enumerate() if thread.name == "fallback-dns"}
    source = HttpFallbackSource(HttpSourceConfig(name="wiki", url=f"http://{hung_resolver}/search", timeout_s=0.2))
    for _ in range(5):
        with pytest.raises(FallbackError, match="timed out after 0.2s resolving"):
            source.search("travel", limit=5)
    hung = {thread for thread in threading.enumerate() if thread.name == "fallback-dns"} - before
    assert len(hung) == 2  # one per slot; the other three searches waited for a slot, not a thread


def test_a_lookup_thread_that_cannot_start_gives_its_slot_back(monkeypatch: pytest.MonkeyPatch) -> None:
    from ingestion import http_source as fallback

    slots = threading.BoundedSemaphore(1)
    monkeypatch.setattr(fallback, "_LOOKUP_SLOTS", slots)

    def no_thread(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    source = HttpFallbackSource(HttpSourceConfig(name="wiki", url="http://wiki.corp.example/search", timeout_s=0.2))
    with monkeypatch.context() as patch:
        patch.setattr(threading.Thread, "start", no_thread)
        for _ in range(3):
            with pytest.raises(FallbackError, match="could not start a name lookup for 'wiki.corp.example'"):
                source.search("travel", limit=5)
    assert slots.acquire(blocking=False)  # the one slot is still there


@pytest.mark.parametrize(
    "url", ["http://wiki.example:abc/search", "http://\N{GRINNING FACE}.example/search", "http://xn--/search"]
)
def test_a_malformed_source_url_is_refused_when_configured(url: str) -> None:
    with pytest.raises(ValueError, match="source 'wiki': url is not a valid URL"):
        HttpSourceConfig(name="wiki", url=url)


def test_non_json_is_a_clear_error(server: LocalServer) -> None:
    with pytest.raises(FallbackError, match="fallback source 'intranet-wiki' returned a response that is not JSON"):
        local_source(server, "/html").search("travel", limit=5)


def test_a_redirect_to_another_port_of_an_allowed_host_is_refused(server: LocalServer) -> None:
    with pytest.raises(FallbackError, match="refused a redirect to port 1"):
        local_source(server, "/redirect-port").search("travel", limit=5)


def test_a_compressed_response_is_refused_before_it_is_inflated(server: LocalServer) -> None:
    with pytest.raises(FallbackError, match="'gzip, gzip'-encoded response"):
        local_source(server, "/gzip-bomb").search("travel", limit=5)


def test_json_nested_too_deeply_is_a_source_error_not_a_crash(server: LocalServer) -> None:
    with pytest.raises(FallbackError, match="nested too deeply"):
        local_source(server, "/deep-json").search("travel", limit=5)


def test_http_errors_are_reported(server: LocalServer) -> None:
    with pytest.raises(FallbackError, match="answered HTTP 500"):
        local_source(server, "/error").search("travel", limit=5)


@pytest.mark.parametrize("path", ["/html", "/error", "/redirect-off", "/big-declared"])
def test_errors_never_quote_the_query(server: LocalServer, path: str) -> None:
    with pytest.raises(FallbackError) as caught:
        local_source(server, path, max_bytes=1000).search("secretkeyword", limit=5)
    assert "secretkeyword" not in str(caught.value)
    assert server.requests[0].query.get("q") == ["secretkeyword"]  # it was sent, as intended


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="absolute http"):
        HttpSourceConfig(name="bad", url="file:///etc/passwd")
    with pytest.raises(ValueError, match="bad query_template"):
        HttpSourceConfig(name="bad", url="https://wiki.example/s", query_template="{url}?q={query}")
    config = HttpSourceConfig(name="wiki", url="https://Wiki.Example/s")
    assert config.allowed_hosts == ["wiki.example"]


# --- question classes -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "question",
    [
        "How many days do I have to submit travel expenses?",
        "Can I carry over PTO?",
        "Am I allowed to install games on my laptop?",
        "What's the password rotation rule?",
        "Who approves my parental leave?",
        "Is there a dress code?",
        "What should I do about the thing from yesterday?",  # unclear: counts as policy
        "Can I use Python for the reimbursement script?",  # mixed: policy wins
        # Plurals and general signs together: still policy, so never an open-web source.
        "Explain what public holidays we get in Germany",
        "Explain what bonuses and salaries we get",
        "Explain how the company pays for lunches on business trips",
    ],
)
def test_policy_and_unclear_questions_are_policy(question: str) -> None:
    assert classify_question(question) == "policy"


@pytest.mark.parametrize(
    "question",
    [
        "How do I write a list comprehension in Python?",
        "What's the weather in Berlin tomorrow?",
        "Translate 'good morning' into French",
        "What is the capital of Australia?",
    ],
)
def test_clearly_general_questions_are_general(question: str) -> None:
    assert classify_question(question) == "general"


def test_custom_policy_keywords() -> None:
    assert classify_question("What is the weather protocol?", policy_keywords=[r"protocol"]) == "policy"
    assert classify_question("What is the weather for travel?", policy_keywords=[r"protocol"]) == "general"


# --- action policy ----------------------------------------------------------------------------------


def _sources(server: LocalServer) -> tuple[HttpFallbackSource, HttpFallbackSource]:
    internal = local_source(server, "/search", name="intranet-wiki")
    web = local_source(server, "/web-search", name="web-search", open_web=True)
    return internal, web


def test_default_rules(server: LocalServer) -> None:
    internal, web = _sources(server)
    policy = ActionPolicy()
    assert policy.permitted_sources("policy", [internal, web]) == [internal]
    assert policy.permitted_sources("general", [web, internal]) == [web, internal]
    assert policy.permitted_sources("unknown-class", [internal, web]) == [internal]  # treated as policy


def test_rule_table_restricts_kinds_and_names(server: LocalServer) -> None:
    internal, web = _sources(server)
    other = local_source(server, "/search", name="hr-portal")
    policy = ActionPolicy(
        rules={
            "policy": SourceRule(names=frozenset({"hr-portal"})),
            "general": SourceRule(kinds=frozenset({"collection"}), allow_open_web=True),
        }
    )
    assert policy.permitted_sources("policy", [internal, other, web]) == [other]
    assert policy.permitted_sources("general", [internal, other, web]) == []


def test_a_policy_question_never_reaches_an_open_web_source(server: LocalServer) -> None:
    internal, web = _sources(server)
    permissive = ActionPolicy(
        rules={
            "policy": SourceRule(allow_open_web=True, names=frozenset({"web-search", "intranet-wiki"})),
            "general": SourceRule(allow_open_web=True),
        }
    )
    permitted = permissive.permitted_sources("policy", [web, internal])
    assert permitted == [internal]

    for source in permitted:
        source.search("travel expenses", limit=3)
    assert server.paths() == ["/search"]  # the open-web endpoint never saw the query

    assert permissive.permitted_sources("general", [web, internal]) == [web, internal]


def test_a_source_registered_before_metadata_hosts_were_refused_is_skipped_not_fatal(settings, caplog) -> None:
    from sqlalchemy import delete

    from application.runtime import fallback_sources
    from core import db
    from core.models import FallbackSourceRow

    with db.session(settings) as session:
        session.add(
            FallbackSourceRow(
                name="old metadata source",
                kind="http",
                url="http://169.254.169.254/latest/",
                config={"allow_private": True},
            )
        )
    try:
        assert "old metadata source" not in [source.name for source in fallback_sources(settings, None)]
        assert "fallback source 'old metadata source' skipped" in caplog.text
    finally:
        with db.session(settings) as session:
            session.execute(delete(FallbackSourceRow).where(FallbackSourceRow.name == "old metadata source"))
