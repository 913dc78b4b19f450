// The reader view records how far the item was read (issue 50): as the user scrolls, its progress (0 to 1 over all
// its parts) is sent at most every 2 s when it moved; reaching the end of the last part marks the item read. On
// opening, the page goes back to where the user left off. Only the item's saver records (data-record).
(function () {
  "use strict";
  const reader = document.getElementById("reader");
  if (!reader) return;
  const part = Number(reader.dataset.part || 1), parts = Number(reader.dataset.parts || 1);
  const csrf = () => document.querySelector('meta[name="csrf-token"]').content;
  let sent = Number(reader.dataset.progress || 0), done = false, timer = null, quiet = true;

  function fraction() { // how much of this part has been on screen
    const box = reader.getBoundingClientRect();
    if (box.height <= 0) return 1;
    return Math.min(1, Math.max(0, (window.innerHeight - box.top) / box.height));
  }

  function send(body) {
    return fetch(`/api/v1/items/${reader.dataset.itemId}`, {
      method: "PATCH", credentials: "same-origin", keepalive: true, body: JSON.stringify(body),
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRF-Token": csrf() } })
      .catch(() => {}); // the next scroll tries again
  }

  function record() {
    timer = null;
    const f = fraction();
    const progress = Math.round(((part - 1 + f) / parts) * 10000) / 10000;
    if (!done && part === parts && f >= 0.98) {
      done = true; sent = 1;
      send({ read: true, progress: 1 }).then(() => {
        const said = document.querySelector("[data-reading]");
        if (said) said.firstChild.textContent = "Read just now ";
      });
      return;
    }
    if (progress > sent + 0.01 || progress < sent - 0.05) { sent = progress; send({ progress }); }
  }

  if (reader.hasAttribute("data-record")) {
    window.addEventListener("scroll", () => { if (!quiet && timer === null) timer = setTimeout(record, 2000); },
                            { passive: true });
    window.addEventListener("pagehide", () => { if (!quiet && timer !== null) { clearTimeout(timer); record(); } });
  }
  // back to where the user left off (unless the address asks for a place: a highlight, a page part)
  const within = sent * parts - (part - 1);
  if (!location.hash && !new URLSearchParams(location.search).has("highlight") && within > 0 && within < 1) {
    const box = reader.getBoundingClientRect();
    window.scrollTo(0, Math.max(0, window.scrollY + box.top + within * box.height - window.innerHeight));
  }
  // the jump back is not the user's reading: what counts starts with the user's own wheel, key, touch or click
  for (const kind of ["wheel", "keydown", "touchstart", "mousedown"]) {
    window.addEventListener(kind, () => { quiet = false; }, { passive: true, once: true });
  }
})();
