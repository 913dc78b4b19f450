// The library's search box: hits appear as one types (debounced; a newer request cancels the one before), the URL
// keeps the query (Enter or Search loads the page as without JavaScript), and ↑/↓ move through the hits (Enter opens one, Escape goes back to the box).
(function () {
  "use strict";
  const DEBOUNCE_MS = 250;

  function hits() { return Array.from(document.querySelectorAll("#search-results [data-hit] a.hit-title")); }

  function mark(link) {
    document.querySelectorAll("#search-results [data-hit].active").forEach((li) => li.classList.remove("active"));
    if (link) { link.closest("[data-hit]").classList.add("active"); link.focus(); }
  }

  document.addEventListener("DOMContentLoaded", () => {
    const form = document.getElementById("search-form");
    if (!form) return;
    const box = form.querySelector("#q");
    let timer = 0;
    let inflight = null;
    let last = null;

    async function run() {
      const q = box.value.trim();
      const mode = (form.querySelector('input[name="mode"]:checked') || {}).value || "hybrid";
      const key = `${q}\u0000${mode}`;
      if (key === last) return;
      last = key;
      const params = new URLSearchParams();
      if (q) { params.set("q", q); params.set("mode", mode); }
      history.replaceState(null, "", params.toString() ? `?${params}` : location.pathname);
      if (inflight) inflight.abort();
      const target = document.getElementById("search-results");
      if (!q) { target.innerHTML = ""; return; }
      if (form.dataset.folder) params.set("folder_id", form.dataset.folder);
      inflight = new AbortController();
      target.setAttribute("aria-busy", "true");
      try {
        const res = await fetch(`${form.dataset.live}?${params}`, { signal: inflight.signal, credentials: "same-origin" });
        if (res.ok) target.outerHTML = await res.text();
      } catch (e) { /* cancelled by a newer request, or offline: the Search button still works */ }
      finally {
        const now = document.getElementById("search-results");
        if (now) now.removeAttribute("aria-busy");
      }
    }

    box.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(run, DEBOUNCE_MS); });
    form.addEventListener("change", (ev) => { if (ev.target.name === "mode") { clearTimeout(timer); run(); } });
    form.addEventListener("submit", () => { clearTimeout(timer); if (inflight) inflight.abort(); }); // a page load
    last = `${box.value.trim()}\u0000${(form.querySelector('input[name="mode"]:checked') || {}).value || "hybrid"}`;

    document.addEventListener("keydown", (ev) => {
      const list = hits();
      if (!list.length) return;
      const at = list.indexOf(document.activeElement);
      if (ev.key === "ArrowDown" && (document.activeElement === box || at >= 0)) {
        ev.preventDefault();
        mark(list[Math.min(at + 1, list.length - 1)]);
      } else if (ev.key === "ArrowUp" && at >= 0) {
        ev.preventDefault();
        if (at === 0) { mark(null); box.focus(); } else mark(list[at - 1]);
      } else if (ev.key === "Escape" && at >= 0) {
        mark(null);
        box.focus();
      }
    });
  });
})();
