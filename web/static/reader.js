// The item page's reader view: a selection in the text becomes a highlight. Every run of text in #reader carries
// data-at, its offset (in characters, i.e. Unicode code points) into the item's text, so a selection's ends turn
// into char_start and char_end; the words go too, and Lev finds them itself when the offsets do not hold them.
// The form beside the text works from the keyboard alone: type or paste the words, add a note, press Highlight.
(function () {
  "use strict";
  const reader = document.getElementById("reader");
  const form = document.getElementById("highlight-form");
  if (!reader || !form) return;
  const words = form.querySelector("#hl-text");
  const start = form.querySelector("#hl-start");
  const end = form.querySelector("#hl-end");
  const float = document.getElementById("hl-float");
  const csrf = () => document.querySelector('meta[name="csrf-token"]').content;
  const codePoints = (s) => Array.from(s).length; // JavaScript counts UTF-16 units; Lev counts code points

  function textPoint(node, offset) {
    const run = node.parentElement && node.parentElement.closest("[data-at]");
    if (!run || run.tagName === "P" || !reader.contains(run)) return null;
    return Number(run.dataset.at) + codePoints(node.data.slice(0, offset));
  }

  // A selection end inside an element (a triple click, a drag over a paragraph's edge): the first text at or
  // after it, else the end of the last text before it.
  function point(node, offset) {
    if (node.nodeType === Node.TEXT_NODE) return textPoint(node, offset);
    const at = document.createRange();
    at.setStart(node, offset);
    const walk = document.createTreeWalker(reader, NodeFilter.SHOW_TEXT);
    let last = null;
    for (let t = walk.nextNode(); t; t = walk.nextNode()) {
      if (at.comparePoint(t, 0) >= 0) return textPoint(t, 0);
      last = t;
    }
    return last ? textPoint(last, last.data.length) : null;
  }

  // The item's text between two offsets, read from the runs (what Lev holds, without the page's ▶ and headings);
  // a gap between runs is a line break of the text.
  function textBetween(a, b) {
    let out = "", last = null;
    for (const run of reader.querySelectorAll("[data-at]:not(p)")) {
      const at = Number(run.dataset.at), chars = Array.from(run.textContent), stop = at + chars.length;
      if (stop <= a || at >= b) continue;
      if (last !== null && at > last) out += "\n";
      out += chars.slice(Math.max(0, a - at), Math.min(chars.length, b - at)).join("");
      last = stop;
    }
    return out;
  }

  function selected() {
    const sel = window.getSelection();
    if (!sel || sel.isCollapsed || !sel.rangeCount) return null;
    const range = sel.getRangeAt(0);
    if (!reader.contains(range.commonAncestorContainer)) return null;
    const text = sel.toString();
    if (!text.trim()) return null;
    const a = point(range.startContainer, range.startOffset);
    const b = point(range.endContainer, range.endOffset);
    return { text, range, a, b };
  }

  document.addEventListener("selectionchange", () => {
    const got = selected();
    if (!got) { if (float) float.hidden = true; return; }
    words.value = got.text.trim();
    // the offsets of the trimmed words: leading and trailing whitespace moved inside the selection
    const lead = codePoints(got.text) - codePoints(got.text.replace(/^\s+/, ""));
    const trail = codePoints(got.text) - codePoints(got.text.replace(/\s+$/, ""));
    if (got.a !== null && got.b !== null && got.b - trail > got.a + lead) {
      start.value = String(got.a + lead);
      end.value = String(got.b - trail);
      words.value = textBetween(got.a + lead, got.b - trail).trim() || words.value;
    } else { start.value = ""; end.value = ""; }
    if (float) {
      const box = got.range.getBoundingClientRect();
      const host = reader.getBoundingClientRect();
      // just below the selection's last line, where it covers the line after the words, never the words above them
      float.style.top = `${box.bottom - host.top + reader.offsetTop + 6}px`;
      float.style.left = `${Math.min(Math.max(0, box.right - host.left - 90), Math.max(0, reader.clientWidth - 110))}px`;
      float.hidden = false;
    }
  });

  words.addEventListener("input", () => { start.value = ""; end.value = ""; }); // typed words: Lev finds them

  function showError(text) {
    const el = form.querySelector('[role="alert"]');
    el.textContent = text;
    el.hidden = false;
  }

  async function save() {
    form.querySelector('[role="alert"]').hidden = true;
    const body = { text: words.value };
    const note = form.querySelector("#hl-note").value;
    if (note.trim()) body.note = note;
    if (start.value !== "" && end.value !== "") { body.char_start = Number(start.value); body.char_end = Number(end.value); }
    if (!body.text.trim()) { showError("Select some words in the text, or type them, first."); return; }
    const button = form.querySelector('[type="submit"]');
    button.disabled = true;
    let res, data = {};
    try {
      res = await fetch(`/api/v1/items/${form.dataset.itemId}/highlights`, {
        method: "POST", credentials: "same-origin", body: JSON.stringify(body),
        headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRF-Token": csrf() } });
      try { data = await res.json(); } catch (e) { /* no body */ }
    } catch (e) {
      button.disabled = false;
      showError("The server cannot be reached. Check your connection and try again.");
      return;
    }
    button.disabled = false;
    if (!res.ok) { showError(data.message || data.error || `Something went wrong (HTTP ${res.status}).`); return; }
    const u = new URL(location.href);
    u.searchParams.delete("part");
    u.searchParams.set("highlight", data.id);
    u.hash = `h-${data.id}`;
    location.assign(u.toString());
  }

  form.addEventListener("submit", (ev) => { ev.preventDefault(); save(); });
  // ▶ before a transcript's passage: play the recording from there (Lev's copy, or the video's own page)
  reader.addEventListener("click", (ev) => {
    const play = ev.target.closest("[data-seek]");
    if (!play) return;
    const player = document.getElementById("player");
    if (player) { player.currentTime = Number(play.dataset.seek); player.play().catch(() => {}); }
    else if (play.dataset.href) location.assign(play.dataset.href);
  });
  if (float) {
    float.addEventListener("mousedown", (ev) => ev.preventDefault()); // keep the selection
    float.addEventListener("click", () => { float.hidden = true; save(); });
  }
})();
