// The Add card's files: one file or several, chosen or dropped, and whole folders. Each file goes through the
// signed-URL handshake (signed URL -> PUT with progress -> finalize); a folder's files are kept by their path
// (`source_path`, as `lev sync` and a ZIP's import keep them: folders named by their path, the same file again
// changes nothing, a changed one updates its item). One chosen file opens its item's page, as it always did; more
// are sent a few at a time and end in a list of what became of each.
(function () {
  "use strict";
  const { api, words, showError } = window.Lev;
  const MAX_UPLOAD = 52428800;
  const AT_ONCE = 3; // files in flight together
  // A file's extension -> the MIME type Lev keeps it as: lev/core/mimes.py's NAME_MIME, the one table of this script
  // (tests/web/test_add_files.py compares them). A file of another extension is not uploaded.
  const TYPES = {
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".docm": "application/vnd.ms-word.document.macroenabled.12", ".odt": "application/vnd.oasis.opendocument.text",
    ".rtf": "application/rtf",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".pptm": "application/vnd.ms-powerpoint.presentation.macroenabled.12",
    ".odp": "application/vnd.oasis.opendocument.presentation",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".xlsm": "application/vnd.ms-excel.sheet.macroenabled.12", ".ods": "application/vnd.oasis.opendocument.spreadsheet",
    ".csv": "text/csv", ".tsv": "text/tab-separated-values", ".epub": "application/epub+zip",
    ".md": "text/markdown", ".markdown": "text/markdown", ".html": "text/html", ".htm": "text/html",
    ".xhtml": "application/xhtml+xml", ".eml": "message/rfc822",
    ".txt": "text/plain", ".text": "text/plain", ".log": "text/plain", ".org": "text/plain", ".rst": "text/plain",
    ".tex": "text/plain", ".json": "application/json", ".jsonl": "application/x-ndjson",
    ".ndjson": "application/x-ndjson", ".yaml": "application/yaml", ".yml": "application/yaml",
    ".toml": "application/toml",
    ".pdf": "application/pdf", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
    ".webp": "image/webp", ".gif": "image/gif", ".tif": "image/tiff", ".tiff": "image/tiff",
    ".mp3": "audio/mpeg", ".m4a": "audio/mp4", ".wav": "audio/wav", ".ogg": "audio/ogg", ".opus": "audio/ogg",
    ".flac": "audio/flac", ".mp4": "video/mp4", ".webm": "video/webm", ".mkv": "video/webm",
    ".mov": "video/quicktime",
  };
  const KNOWN = new Set(Object.values(TYPES));
  const SYSTEM_NAMES = new Set(["__macosx", "thumbs.db", "desktop.ini"]); // lev/sync/tree.py's, never read
  const OUTCOMES = ["added", "updated", "unchanged", "skipped", "failed"];

  function mimeOf(file) {
    const dot = file.name.lastIndexOf(".");
    const ext = dot > 0 ? file.name.slice(dot).toLowerCase() : "";
    return TYPES[ext] || (KNOWN.has(file.type) ? file.type : null);
  }

  const hidden = (name) => name.startsWith(".") || SYSTEM_NAMES.has(name.toLowerCase());

  // Why a file is not sent (said in the result list), or "" when it is.
  function refusal(file, mime) {
    if (!mime) return "Lev does not read this type of file";
    if (file.size === 0) return "the file is empty";
    if (file.size > MAX_UPLOAD) return "larger than 50 MB, the upload limit";
    return "";
  }

  // One file through the handshake; `extra` joins the finalize body (source_path). Answers finalize's reply.
  async function send(file, mime, extra, onProgress) {
    const signed = await api("POST", "/api/v1/uploads/signed-url", { mime, size: file.size, filename: file.name });
    if (!signed.ok) return signed;
    const s = signed.data;
    const put = await new Promise((resolve) => {
      const xhr = new XMLHttpRequest();
      xhr.open(s.method || "PUT", s.signed_url);
      const headers = s.headers || { "Content-Type": mime };
      for (const k of Object.keys(headers)) xhr.setRequestHeader(k, headers[k]);
      xhr.upload.onprogress = (e) => { if (e.lengthComputable && onProgress) onProgress(Math.round((e.loaded / e.total) * 100)); };
      xhr.onload = () => { let d = {}; try { d = JSON.parse(xhr.responseText); } catch (e) { /* S3 answers XML */ } resolve({ ok: xhr.status < 300, status: xhr.status, data: d }); };
      xhr.onerror = () => resolve({ ok: false, status: 0, data: { message: "The upload was interrupted. Try again." } });
      xhr.send(file);
    });
    if (!put.ok) return put;
    return api("POST", `/api/v1/uploads/${s.finalize_endpoint}`, { path: s.path, mime, size: file.size, filename: file.name, ...extra });
  }

  // One chosen or dropped file: progress, then the item's page (its status updates live).
  async function single(zone, file) {
    const state = zone.querySelector("#upload-state");
    const bar = zone.querySelector("progress");
    const mime = mimeOf(file);
    if (!mime) { showError(zone, "This kind of file is not supported: upload a PDF, an image, audio, video or a document Lev reads."); return; }
    if (refusal(file, mime)) { showError(zone, file.size ? "The file is larger than 50 MB, the upload limit." : "The file is empty."); return; }
    state.textContent = `Preparing ${file.name}…`;
    bar.hidden = false; bar.value = 0;
    const fin = await send(file, mime, {}, (pct) => { bar.value = pct; state.textContent = `Uploading ${file.name}: ${pct}%`; });
    if (!fin.ok) { state.textContent = ""; bar.hidden = true; showError(zone, words(fin)); return; }
    bar.value = 100;
    const folder = zone.dataset.folder;
    if (folder) await api("POST", `/api/v1/items/${fin.data.user_item_id}/folders`, { folder_ids: [folder] });
    location.assign(`/items/${fin.data.user_item_id}`);
  }

  // The files of a folder already kept by their path, with their SHA-256 (GET /api/v1/source-files), so that the
  // same bytes are not sent again; empty when the browser cannot hash (not a secure context) or the list fails.
  async function keptFiles(tops) {
    const kept = new Map();
    if (!(window.crypto && crypto.subtle)) return kept;
    for (const top of tops) {
      let after = null;
      do {
        const q = `prefix=${encodeURIComponent(top + "/")}${after ? `&after=${encodeURIComponent(after)}` : ""}`;
        const r = await api("GET", `/api/v1/source-files?${q}`);
        if (!r.ok) return new Map();
        for (const f of r.data.files) kept.set(f.path, f);
        after = r.data.next_after;
      } while (after);
    }
    return kept;
  }

  async function sha256(file) {
    const digest = await crypto.subtle.digest("SHA-256", await file.arrayBuffer());
    return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
  }

  // Several files: `entries` are {file, rel, kept} (kept: from a folder, sent with its path) and {rel, hidden}.
  async function many(zone, entries) {
    const state = zone.querySelector("#upload-state");
    const bar = zone.querySelector("progress");
    const results = [];
    const todo = [];
    for (const e of entries) {
      if (e.hidden) { results.push({ rel: e.rel, outcome: "skipped", note: "hidden" }); continue; }
      const mime = mimeOf(e.file);
      const why = refusal(e.file, mime);
      if (why) results.push({ rel: e.rel, outcome: "skipped", note: why });
      else todo.push({ ...e, mime });
    }
    const tops = [...new Set(todo.filter((e) => e.kept).map((e) => e.rel.split("/")[0]))];
    state.textContent = tops.length ? "Comparing with the files already kept…" : "";
    const kept = await keptFiles(tops);
    bar.hidden = false; bar.value = 0;
    let started = 0;
    let done = 0;
    const one = async (e) => {
      started += 1;
      state.textContent = `Uploading ${started} of ${todo.length}: ${e.rel}`;
      const had = e.kept && kept.get(e.rel);
      if (had && had.size_bytes === e.file.size && had.sha256 === await sha256(e.file)) {
        return { rel: e.rel, outcome: "unchanged", item: had.item_id };
      }
      const fin = await send(e.file, e.mime, e.kept ? { source_path: e.rel } : {});
      if (!fin.ok) return { rel: e.rel, outcome: "failed", note: words(fin) };
      const item = fin.data.user_item_id;
      if (!e.kept && zone.dataset.folder) await api("POST", `/api/v1/items/${item}/folders`, { folder_ids: [zone.dataset.folder] });
      return { rel: e.rel, outcome: fin.data.source_file ? fin.data.source_file.change : "added", item };
    };
    const queue = todo.slice();
    const worker = async () => {
      while (queue.length) {
        const e = queue.shift();
        let r;
        try { r = await one(e); } catch (err) { r = { rel: e.rel, outcome: "failed", note: `The file could not be read: ${err.message || err}` }; }
        results.push(r);
        done += 1;
        bar.value = Math.round((done / todo.length) * 100);
      }
    };
    await Promise.all(Array.from({ length: Math.min(AT_ONCE, todo.length) }, worker));
    bar.hidden = true;
    state.textContent = "";
    report(zone, results);
  }

  function report(zone, results) {
    const box = zone.querySelector("#upload-result");
    const list = box.querySelector("ul");
    list.replaceChildren();
    const counts = OUTCOMES.map((o) => `${results.filter((r) => r.outcome === o).length} ${o}`);
    box.querySelector("[data-summary]").textContent = `Done: ${counts.join(", ")}.`;
    for (const o of OUTCOMES) {
      for (const r of results.filter((x) => x.outcome === o).sort((a, b) => a.rel.localeCompare(b.rel))) {
        const li = document.createElement("li");
        li.dataset.outcome = o;
        const main = document.createElement("span");
        main.className = "main";
        if (r.item) { const a = document.createElement("a"); a.href = `/items/${r.item}`; a.textContent = r.rel; main.append(a); }
        else main.textContent = r.rel;
        const side = document.createElement("span");
        side.className = o === "failed" ? "error" : "muted";
        side.textContent = r.note ? `${o}: ${r.note}` : o;
        li.append(main, side);
        list.append(li);
      }
    }
    box.hidden = false;
    box.setAttribute("tabindex", "-1");
    box.focus();
  }

  function start(zone, entries) {
    zone.querySelector('[role="alert"]').hidden = true;
    zone.querySelector("#upload-result").hidden = true;
    if (!entries.length) return;
    if (entries.length === 1 && !entries[0].kept && !entries[0].hidden) { single(zone, entries[0].file); return; }
    many(zone, entries);
  }

  // A chosen folder's files come flat with their path (`notes/sub/plan.md`); a hidden part (`.obsidian/`) skips
  // what is under it, listed once.
  function fromFolderInput(files) {
    const out = [];
    const skipped = new Set();
    for (const file of files) {
      const rel = file.webkitRelativePath || file.name;
      const parts = rel.split("/");
      const at = parts.findIndex(hidden);
      if (at >= 0) {
        const key = parts.slice(0, at + 1).join("/") + (at < parts.length - 1 ? "/" : "");
        if (!skipped.has(key)) { skipped.add(key); out.push({ rel: key, hidden: true }); }
      } else out.push({ file, rel, kept: true });
    }
    return out;
  }

  // Dropped things: files, and folders read through the entries API (FileSystemDirectoryEntry), all their levels.
  async function fromEntries(roots) {
    const out = [];
    const fileOf = (entry) => new Promise((resolve, reject) => entry.file(resolve, reject));
    const readAll = async (dir) => {
      const reader = dir.createReader();
      const all = [];
      for (;;) {
        const batch = await new Promise((resolve, reject) => reader.readEntries(resolve, reject));
        if (!batch.length) return all;
        all.push(...batch);
      }
    };
    const walk = async (entry, kept) => {
      const rel = entry.fullPath.replace(/^\/+/, "");
      if (kept && hidden(entry.name)) { out.push({ rel: entry.isDirectory ? `${rel}/` : rel, hidden: true }); return; }
      if (entry.isDirectory) {
        for (const child of await readAll(entry)) await walk(child, true);
      } else if (entry.isFile) {
        try { out.push({ file: await fileOf(entry), rel, kept }); } catch (e) { /* gone meanwhile */ }
      }
    };
    for (const root of roots) await walk(root, root.isDirectory);
    return out;
  }

  document.addEventListener("DOMContentLoaded", () => {
    const zone = document.getElementById("dropzone");
    if (!zone) return;
    const files = zone.querySelector("#file");
    const folder = zone.querySelector("#folder-file");
    files.accept = Object.keys(TYPES).join(",");
    files.addEventListener("change", () => { start(zone, Array.from(files.files, (file) => ({ file, rel: file.name, kept: false }))); files.value = ""; });
    folder.addEventListener("change", () => { start(zone, fromFolderInput(folder.files)); folder.value = ""; });
    zone.addEventListener("dragover", (e) => { e.preventDefault(); zone.classList.add("over"); });
    zone.addEventListener("dragleave", () => zone.classList.remove("over"));
    zone.addEventListener("drop", (e) => {
      e.preventDefault();
      zone.classList.remove("over");
      const items = Array.from(e.dataTransfer.items || []).filter((i) => i.kind === "file");
      const roots = items.map((i) => (i.webkitGetAsEntry ? i.webkitGetAsEntry() : null)); // only valid during the event
      if (roots.length && roots.every(Boolean)) fromEntries(roots).then((entries) => start(zone, entries));
      else start(zone, Array.from(e.dataTransfer.files, (file) => ({ file, rel: file.name, kept: false })));
    });
  });
})();
