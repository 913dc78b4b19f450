"""A loopback web site serving real-looking HTML articles and awkward cases, for ingest tests."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARTICLES = {
    "/volcano": ("How volcanoes form", [
        "Volcanoes form where molten rock, called magma, rises through the Earth's crust and erupts at the "
        "surface. Most volcanoes sit along the boundaries of tectonic plates, where plates pull apart or dive "
        "beneath one another in subduction zones.",
        "When an oceanic plate sinks into the mantle, water released from its minerals lowers the melting point "
        "of the rock above it. The resulting magma is buoyant and gathers in chambers several kilometres deep.",
        "Stratovolcanoes such as Mount Fuji build steep cones from alternating layers of lava and ash, while "
        "shield volcanoes like Mauna Loa grow broad and gentle from runny basaltic lava flows.",
    ]),
    "/sourdough": ("Baking sourdough bread at home", [
        "Sourdough bread rises without commercial yeast. Instead a starter, a fermented mixture of flour and "
        "water, carries wild yeasts and lactic acid bacteria that leaven the dough and give it a tangy flavour.",
        "Feed the starter twice a day with equal weights of flour and water until it doubles reliably within a "
        "few hours. Mix the dough, let it rest, then stretch and fold it every half hour during bulk fermentation.",
        "Shape the loaf, proof it overnight in the refrigerator, and bake it in a preheated Dutch oven at a high "
        "temperature so that the crust blisters and the crumb stays open and moist.",
    ]),
    "/quantum": ("An introduction to quantum entanglement", [
        "Quantum entanglement links two particles so that measuring one immediately tells you about the other, "
        "no matter how far apart they are. Einstein famously called it spooky action at a distance.",
        "Entangled photons are produced in the laboratory by spontaneous parametric down-conversion in a "
        "nonlinear crystal. Bell test experiments with such photons have ruled out local hidden variable theories.",
        "Entanglement is the resource behind quantum teleportation, quantum key distribution and the speed-up of "
        "many quantum algorithms running on superconducting or trapped-ion quantum computers.",
    ]),
}


TOPICS = ["glaciers", "beekeeping", "typography", "compilers", "tide pools", "violin making", "orbital mechanics",
          "fermentation", "bird migration", "cartography", "volcanic soil", "bridge design", "coral reefs",
          "chess openings", "solar panels", "medieval castles", "mushroom foraging", "jazz harmony",
          "rainforest canopies", "sailing knots"]
VERBS = ["shapes", "explains", "changes", "reveals", "depends on", "teaches us about", "complicates", "improves"]
NOUNS = ["seasons", "craft", "history", "measurement", "patience", "materials", "communities", "errors",
         "maps", "memory", "light", "water"]


def generated_article(n: int) -> tuple[str, list[str]]:
    """Article number `n` of an endless loopback site: a distinct title and three paragraphs about its topic."""
    topic = TOPICS[n % len(TOPICS)]
    title = f"Notes on {topic}, part {n}"
    paragraphs = [
        f"Part {n} of the series on {topic}. How {topic} {VERBS[(n + k) % len(VERBS)]} "
        f"{NOUNS[(n * 3 + k) % len(NOUNS)]}, and what practitioners of {topic} learned over the years. "
        f"Observation {n}-{k}: the details of {topic} matter more than the summary suggests."
        for k in range(3)]
    return title, paragraphs


def article_html(title: str, paragraphs: list[str]) -> bytes:
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return (
        f"<!doctype html><html><head><title>{title}</title><meta name='author' content='Ada Writer'></head>"
        f"<body><nav><a href='/'>Home</a> | <a href='/about'>About us</a> | Subscribe to our newsletter</nav>"
        f"<article><h1>{title}</h1>{body}</article>"
        f"<footer>Copyright 2026 Example Media. All rights reserved. Cookie settings.</footer></body></html>"
    ).encode()


MEMBERS = {  # /members/<slug>: the article for a signed-in reader (cookie `member=1`), else a sign-in form
    "tides": ("Members only: the secret life of tide pools", [
        "Tide pools hold anemones, hermit crabs and sea stars that survive twice-daily exposure to air. Members "
        "learn that the ochre sea star pries open mussels with hydraulic tube feet and eats them inside out.",
        "Periwinkle snails graze the algal film on the rocks, and sculpin fish hide in crevices until the sea "
        "returns. Our field guide counts forty-two species in a single pool near Pescadero.",
        "Visit at the lowest spring tides, step only on bare rock, and put every stone back the way you found it "
        "so the animals beneath keep their shade and moisture.",
    ]),
    "glaciers": ("Members only: how glaciers carve valleys", [
        "Glaciers grind bedrock with the stones frozen into their base, turning V-shaped river valleys into broad "
        "U-shaped troughs. Members get the full map of the cirques above Lauterbrunnen.",
        "Meltwater under the ice lubricates the bed and lets the glacier slide faster in summer; crevasses open "
        "where the ice stretches over a bump in the rock.",
        "When the ice retreats it leaves moraines, erratic boulders and hanging valleys whose streams fall as "
        "waterfalls from the high lip into the main trough below.",
    ]),
}
TEASERS = {  # /teaser/<slug>: what anyone (and Lev's own fetch) reads without the member cookie
    "tides": ("The secret life of tide pools (preview)", [
        "This is the free preview of our tide pool feature. Rocky shores between the high and low water marks "
        "are among the most studied habitats on the coast, and anyone with sturdy shoes can explore them.",
        "Subscribe to read the full article with the field guide, the species count and our advice on visiting "
        "at low tide without disturbing the animals that live there.",
    ]),
}
LOGIN_FORM = (b"<!doctype html><html><head><title>Sign in to keep reading</title></head><body><h1>Sign in</h1>"
              b"<form method='post' action='/session'><label>Email <input name='email'></label>"
              b"<label>Password <input name='password' type='password'></label><button>Sign in</button></form>"
              b"</body></html>")
# A page whose article only exists once its script ran: a server fetch finds an empty shell.
SCRIPT_BUILT = (b"<!doctype html><html><head><title>Built by a script</title></head><body><div id='app'></div>"
                b"<script src='/app.js'></script></body></html>")
SCRIPT_BUILT_JS = (b"document.getElementById('app').innerHTML = '<article><h1>Lanterns of the night market</h1>' + "
                   b"['Paper lanterns glow above the night market stalls, where vendors fry scallion pancakes and "
                   b"grill skewers of squid over charcoal until long after midnight.', 'Each lantern is folded from "
                   b"mulberry paper and painted by hand; the oldest workshop in the lane has made them for four "
                   b"generations and still mixes its own vermilion.'].map(function (p) { return '<p>' + p + "
                   b"'</p>'; }).join('') + '</article>';")


class _Handler(BaseHTTPRequestHandler):
    hits: list[str]

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, ctype: str = "text/html; charset=utf-8",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.server.hits.append(self.path)  # type: ignore[attr-defined]
        path = self.path.split("?")[0].split("#")[0]
        member = "member=1" in (self.headers.get("Cookie") or "")
        if path in ARTICLES:
            title, paras = ARTICLES[path]
            self._send(200, article_html(title, paras))
        elif path.startswith("/members/") and path[9:] in MEMBERS:
            self._send(200, article_html(*MEMBERS[path[9:]]) if member else LOGIN_FORM)
        elif path.startswith("/teaser/") and path[8:] in TEASERS:
            self._send(200, article_html(*(MEMBERS if member else TEASERS)[path[8:]]))
        elif path == "/script-built":
            self._send(200, SCRIPT_BUILT)
        elif path == "/app.js":
            self._send(200, SCRIPT_BUILT_JS, "text/javascript")
        elif path.startswith("/a/") and path[3:].isdigit():  # /a/<n>: as many distinct articles as a test needs
            self._send(200, article_html(*generated_article(int(path[3:]))))
        elif path.startswith("/slow/"):  # /slow/<name>?s=<seconds>: a page that takes its time
            query = dict(p.split("=", 1) for p in self.path.partition("?")[2].split("&") if "=" in p)
            time.sleep(float(query.get("s", "3")))
            title, paras = ARTICLES["/volcano"]
            self._send(200, article_html(f"{title} ({path[6:]})", paras))
        elif path.startswith("/gate/"):  # /gate/<name>?n=<k>: answers once k requests for it are waiting
            query = dict(p.split("=", 1) for p in self.path.partition("?")[2].split("&") if "=" in p)
            self.server.gate(path, int(query.get("n", "2"))).wait()  # type: ignore[attr-defined]
            title, paras = ARTICLES["/sourdough"]
            self._send(200, article_html(f"{title} ({path[6:]})", paras))
        elif path == "/redirect":
            self._send(302, b"", headers={"Location": "/volcano"})
        elif path == "/missing":
            self._send(404, b"<html><body>Not here</body></html>")
        elif path == "/login":
            self._send(401, b"<html><body>Sign in</body></html>")
        elif path == "/empty":
            self._send(200, b"<html><head><title>Empty</title></head><body><p>Hi.</p></body></html>")
        elif path == "/binary":
            self._send(200, b"\x00\x01\x02" * 100, "application/octet-stream")
        elif path == "/doc.pdf":
            self._send(200, b"%PDF-1.4\n", "application/pdf")
        elif path == "/huge":
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(25 * 1024 * 1024))
            self.end_headers()
            try:
                chunk = b"<p>" + b"a" * 65536 + b"</p>"
                for _ in range(400):
                    self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
        else:
            self._send(404, b"no")


class _Server(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.hits: list[str] = []
        self.gates: dict[str, threading.Barrier] = {}
        self.gates_lock = threading.Lock()

    def gate(self, name: str, parties: int) -> threading.Barrier:
        with self.gates_lock:
            return self.gates.setdefault(name, threading.Barrier(parties, timeout=60))


class Site:
    def __init__(self) -> None:
        self.httpd = _Server()
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def hits(self) -> list[str]:
        return self.httpd.hits  # type: ignore[attr-defined]

    def close(self) -> None:
        self.httpd.shutdown()
