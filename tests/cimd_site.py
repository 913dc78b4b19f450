"""An OAuth client's web site on loopback, over real TLS: it serves client ID metadata documents at https URLs.

`LoopbackCA` makes a throwaway certificate authority and a certificate for 127.0.0.1 / localhost signed by it; the
session server trusts that CA through LEV_OUTBOUND_CA_FILE (the setting an operator uses for an internal CA), so
production certificate checking stays exactly as it is."""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


class LoopbackCA:
    """A CA certificate (`ca_file`, what the server trusts) and a loopback server certificate signed by it."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Lev test CA")])
        ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
              .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
              .not_valid_after(now + datetime.timedelta(days=2))
              .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
              .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                           content_commitment=False, key_encipherment=False, data_encipherment=False,
                                           key_agreement=False, encipher_only=False, decipher_only=False),
                             critical=True)
              .sign(ca_key, hashes.SHA256()))
        key = ec.generate_private_key(ec.SECP256R1())
        san = x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                           x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
                .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
                .add_extension(san, critical=False).sign(ca_key, hashes.SHA256()))
        self.ca_file = directory / "ca.pem"
        self.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        self.cert_file = directory / "site.pem"
        self.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self.key_file = directory / "site.key"
        self.key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                    serialization.NoEncryption()))


class ClientSite:
    """https://127.0.0.1:PORT serving the documents in `docs` (path -> JSON value, or (status, bytes, headers));
    paths in `drip` are sent slowly."""

    def __init__(self, ca: LoopbackCA) -> None:
        self.docs: dict[str, Any] = {}
        self.drip: dict[str, float] = {}  # path -> seconds between 10-byte pieces of its body (a slow server)
        self.hits: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                site.hits.append(self.path)
                doc = site.docs.get(self.path)
                status, body, headers = (404, b"{}", {}) if doc is None else doc if isinstance(doc, tuple) else \
                    (200, json.dumps(doc).encode(), {"Cache-Control": "max-age=600"})
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", "Content-Length": str(len(body)), **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                delay = site.drip.get(self.path)
                try:
                    for i in range(0, len(body), 10 if delay else len(body) or 1):
                        self.wfile.write(body[i:i + 10] if delay else body)
                        if delay:
                            time.sleep(delay)
                except OSError:  # the reader gave up
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(ca.cert_file, ca.key_file)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def document(self, path: str, redirect_uris: list[str], name: str = "Site client", **extra: Any) -> str:
        """Publish a valid client ID metadata document at `path`; returns its URL (the client_id)."""
        url = self.url + path
        self.docs[path] = {"client_id": url, "client_name": name, "redirect_uris": redirect_uris,
                           "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
                           "token_endpoint_auth_method": "none", **extra}
        return url

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
