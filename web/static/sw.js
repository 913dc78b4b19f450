// Lev's service worker: it makes the web app installable (on a phone it then appears in the share sheet). It
// keeps no copy of anything: every request goes to the network, and only a page that cannot be reached at all is
// answered with a short offline notice (no private data is ever cached).
"use strict";
const OFFLINE = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" " +
  "content=\"width=device-width, initial-scale=1\"><title>Offline · Lev</title></head><body style=\"font: 16px " +
  "system-ui, sans-serif; margin: 2rem\"><h1>Lev cannot be reached</h1><p>Check your connection, then reload " +
  "this page.</p></body></html>";

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));
self.addEventListener("fetch", (event) => {
  if (event.request.mode !== "navigate") return; // everything else goes to the network untouched
  event.respondWith(fetch(event.request).catch(() => new Response(OFFLINE, {
    status: 503, headers: { "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store" },
  })));
});
