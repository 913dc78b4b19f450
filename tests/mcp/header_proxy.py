"""A loopback reverse proxy that adds one header (the bearer token) to every request, for MCP clients that cannot
send one (the MCP conformance suite). Host and Origin pass through as sent, except that the proxy's own loopback
address is rewritten to the upstream's: a request that names the proxy is, to Lev, a request to itself, and one
that names any other host (a DNS-rebinding probe) reaches Lev as it was sent."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-authorization",
              "proxy-authenticate", "content-length", "host"}


class HeaderProxy:
    def __init__(self, upstream: str, headers: dict[str, str]) -> None:
        self.upstream = upstream.rstrip("/")
        self.extra = headers
        self.seen: list[tuple[str, str, int]] = []  # (method, path, status) of every request passed on
        up = urlsplit(self.upstream)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: object) -> None:
                pass

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                host = self.headers.get("Host", "")
                mine = f"127.0.0.1:{proxy.port}", f"localhost:{proxy.port}", f"[::1]:{proxy.port}"
                if host in mine:
                    host = f"{host.rsplit(':', 1)[0]}:{up.port}"
                for name in [k for k in headers if k.lower() == "origin"]:
                    origin = headers[name]
                    for own in mine:
                        if origin == f"http://{own}":
                            headers[name] = f"http://{own.rsplit(':', 1)[0]}:{up.port}"
                headers.update(proxy.extra)
                with httpx.Client(timeout=120) as client:
                    r = client.request(self.command, f"{proxy.upstream}{self.path}", content=body,
                                       headers={**headers, "Host": host})
                proxy.seen.append((self.command, self.path, r.status_code))
                self.send_response(r.status_code)
                for k, v in r.headers.multi_items():
                    if k.lower() not in HOP_BY_HOP and k.lower() != "content-encoding":
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(r.content)))
                self.end_headers()
                self.wfile.write(r.content)

            do_GET = do_POST = do_DELETE = do_OPTIONS = _forward

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
