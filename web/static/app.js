// Lev's pages: forms and buttons with data-api="METHOD /path" send JSON to the REST and account APIs with the
// session's X-CSRF-Token, show errors in words, then follow data-then. The Add card's files and folders are upload.js's (it uses window.Lev).
(function () {
  "use strict";
  const csrf = () => document.querySelector('meta[name="csrf-token"]').content;

  // A path with a `.` or `..` segment (a hostile name put in it) is never sent: the browser would resolve it to
  // another resource (DELETE .../tags/.. is DELETE of the item).
  const DOT_SEGMENT = /^(\.|%2e){1,2}$/i;

  async function api(method, url, body) {
    if (url.split(/[?#]/)[0].split("/").some((part) => DOT_SEGMENT.test(part))) {
      return { ok: false, status: 400, data: { error: "invalid_body", message: "This name cannot be used in an address: rename it first." } };
    }
    const headers = { "X-CSRF-Token": csrf(), Accept: "application/json" };
    const init = { method, headers, credentials: "same-origin" };
    if (body !== undefined) { headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
    let res;
    try { res = await fetch(url, init); } catch (e) { return { ok: false, status: 0, data: { message: "The server cannot be reached. Check your connection and try again." } }; }
    let data = {};
    try { data = await res.json(); } catch (e) { /* empty body */ }
    return { ok: res.ok, status: res.status, data };
  }

  // Only ever navigate within Lev: the browser's own URL parser decides (it reads "\\" as "/", drops tabs, ...).
  function sameOrigin(target) {
    try { const u = new URL(target, location.href); return u.origin === location.origin ? u.href : "/"; } catch (e) { return "/"; }
  }

  function words(r) {
    const d = r.data || {};
    switch (d.error) {
      case "payment_required": return `Your ${d.tier} plan cannot mint more tokens: the cap is ${d.cap} and you have ${d.used}. Revoke one, or ask this server's operator to change your plan.`;
      case "quota_exceeded": return d.message || `The monthly transcription quota of your ${d.tier} plan (${d.cap_per_month} min) is used up.`;
      case "file_too_large": return "The file is larger than 50 MB, the upload limit.";
      case "unsupported_media_type": return d.message || "This kind of file is not supported: upload a PDF, an image, audio or video.";
      case "rate_limited": return d.message || `Too many requests; try again in ${d.retry_after_sec} s.`;
      case "not_signed_in": return "Your session has ended. Sign in again.";
      case "csrf_failed": return "This page is out of date. Reload it and try again.";
      case "invalid_credentials": return "The email or password is wrong.";
      default: return d.message || d.error || `Something went wrong (HTTP ${r.status}).`;
    }
  }

  function showError(scope, text) {
    const el = scope && scope.querySelector('[role="alert"]');
    if (el) { el.textContent = text; el.hidden = false; el.focus && el.setAttribute("tabindex", "-1"); }
    else { window.alert(text); }
  }

  function collect(form) {
    const body = {};
    for (const el of form.elements) {
      if (!el.name || el.disabled || el.hasAttribute("data-skip")) continue;
      const box = el.closest("[data-kind]");
      if (box && box.hidden) continue;
      if (el.type === "checkbox" && el.hasAttribute("data-list")) { body[el.name] = body[el.name] || []; if (el.checked) body[el.name].push(el.value); }
      else if (el.type === "checkbox") body[el.name] = el.checked;
      else if (el.type === "radio") { if (el.checked) body[el.name] = el.value; }
      else if (el.hasAttribute("data-list")) body[el.name] = Array.from(el.selectedOptions).map((o) => o.value);
      else if (el.hasAttribute("data-number")) body[el.name] = Number(el.value);
      else if (el.hasAttribute("data-tags")) body[el.name] = el.value.split(",").map((t) => t.trim()).filter((t) => t);
      else if (el.value.trim() !== "" || el.required) body[el.name] = el.value;
    }
    if (form.id === "mint-form") {
      const access = form.querySelector('input[name="access"]:checked').value;
      if (access === "all") delete body.folder_ids;
      else if (!body.folder_ids || !body.folder_ids.length) return { error: "Choose at least one folder, or give the token the whole library." };
    }
    return { body };
  }

  // Replace the section #id with the same section of the page as the server renders it now.
  async function refreshSection(id) {
    try {
      const res = await fetch(location.href, { credentials: "same-origin" });
      const fresh = new DOMParser().parseFromString(await res.text(), "text/html").getElementById(id);
      const old = document.getElementById(id);
      if (fresh && old) old.replaceWith(document.importNode(fresh, true));
    } catch (e) { /* the list updates on the next visit */ }
  }

  async function then(how, r, scope) {
    const d = r.data || {};
    if (how === "reload") location.reload();
    else if (how.startsWith("go:")) location.assign(sameOrigin(how.slice(3)));
    else if (how === "go-item") {
      if (scope.dataset.folder) await api("POST", `/api/v1/items/${d.user_item_id}/folders`, { folder_ids: [scope.dataset.folder] });
      location.assign(`/items/${d.user_item_id}`);
    }
    else if (how === "go-folder") location.assign(`/folders/${d.id}`);
    else if (how === "token") {
      const box = document.getElementById("minted");
      document.getElementById("new-token").textContent = d.token;
      box.querySelectorAll("[data-snippet]").forEach((pre) => {
        pre.dataset.template = pre.dataset.template || pre.textContent;
        pre.textContent = pre.dataset.template.split("__TOKEN__").join(d.token);
      });
      box.hidden = false;
      box.setAttribute("tabindex", "-1");
      box.focus();
      box.scrollIntoView();
      refreshSection("tokens"); // the list shows the new token at once
    } else if (how === "invite-link") { // an invitation's secret link, shown once
      const box = document.getElementById("invite-link");
      document.getElementById("invite-url").textContent = d.accept_url;
      box.querySelector("[data-invite-said]").textContent = d.emailed
        ? `Invitation sent: Lev mailed this link to ${d.email}.`
        : `Invitation ready: send this link to ${d.email} yourself.`;
      box.hidden = false;
      box.setAttribute("tabindex", "-1");
      box.focus();
      if (scope.tagName === "FORM") scope.reset();
      refreshSection("invited"); // the list shows the new invitation at once
    } else if (how === "verify-sent") {
      const ok = scope.querySelector('[role="status"]');
      ok.textContent = d.sent ? `Mail sent to ${d.email}: open its link while signed in.` : "Your address is verified.";
      ok.hidden = false;
    } else if (how === "secret") { // a webhook endpoint's signing secret, shown once
      const box = document.getElementById("hook-secret");
      document.getElementById("new-secret").textContent = d.secret;
      box.hidden = false;
      box.setAttribute("tabindex", "-1");
      box.focus();
      box.scrollIntoView();
      if (scope.tagName === "FORM") scope.reset();
    } else if (how === "password") {
      const ok = scope.querySelector('[role="status"]');
      if (d.csrf_token) document.querySelector('meta[name="csrf-token"]').content = d.csrf_token; // the fresh session's
      ok.textContent = `Password changed. ${d.revoked_tokens} token(s) were revoked; mint new ones for your agents.`;
      ok.hidden = false;
      scope.reset();
    }
  }

  async function run(el, method, url, body) {
    if (el.dataset.confirm && !window.confirm(el.dataset.confirm)) return;
    const scope = el.tagName === "FORM" ? el : el.closest(".inline, section, form, nav, div");
    const err = scope && scope.querySelector('[role="alert"]');
    if (err) err.hidden = true;
    const button = el.tagName === "FORM" ? el.querySelector('[type="submit"]') : el;
    if (button) button.disabled = true;
    const r = await api(method, url, body);
    if (button) button.disabled = false;
    if (!r.ok) { showError(scope, words(r)); return; }
    await then(el.dataset.then || "reload", r, scope);
  }

  document.addEventListener("submit", (ev) => {
    const form = ev.target.closest("form[data-api]");
    if (!form) return;
    ev.preventDefault();
    const [method, path] = form.dataset.api.split(" ");
    const got = collect(form);
    if (got.error) { showError(form, got.error); return; }
    let url = path;
    let body = method === "DELETE" ? undefined : got.body;
    if (form.dataset.query) { // send these fields in the query string (DELETE ... ?cascade_items=true)
      const qs = form.dataset.query.split(",").map((k) => `${k}=${encodeURIComponent(got.body[k])}`).join("&");
      url = `${path}?${qs}`;
      body = undefined;
    }
    if (body && body.kind === "url") delete body.text;
    if (body && body.kind === "text") delete body.url;
    run(form, method, url, body);
  });

  document.addEventListener("click", (ev) => {
    const copy = ev.target.closest("[data-copy]");
    if (copy) {
      const text = document.querySelector(copy.dataset.copy).textContent;
      navigator.clipboard.writeText(text).then(() => { copy.textContent = "Copied"; }, () => { copy.textContent = "Select and copy"; });
      return;
    }
    const el = ev.target.closest("button[data-api]");
    if (!el || el.form) return;
    const [method, path] = el.dataset.api.split(" ");
    run(el, method, path, el.dataset.body ? JSON.parse(el.dataset.body) : undefined);
  });

  document.addEventListener("change", (ev) => {
    if (ev.target.name === "access" && ev.target.form && ev.target.form.id === "mint-form") {
      document.getElementById("t-folders-box").hidden = ev.target.value !== "folders";
    }
    if (ev.target.name === "kind" && ev.target.form && ev.target.form.id === "add-form") {
      ev.target.form.querySelectorAll("[data-kind]").forEach((box) => { box.hidden = box.dataset.kind !== ev.target.value; });
    }
  });

  // A file form (data-upload="/api/..."): the file goes as multipart/form-data, the answer is said in words.
  async function postFile(url, file) {
    const data = new FormData();
    data.append("file", file);
    try {
      const res = await fetch(url, { method: "POST", body: data, credentials: "same-origin",
        headers: { "X-CSRF-Token": csrf(), Accept: "application/json" } });
      let d = {};
      try { d = await res.json(); } catch (e) { /* empty body */ }
      return { ok: res.ok, status: res.status, data: d };
    } catch (e) {
      return { ok: false, status: 0, data: { message: "The server cannot be reached. Check your connection and try again." } };
    }
  }

  document.addEventListener("submit", async (ev) => {
    const form = ev.target.closest("form[data-upload]");
    if (!form) return;
    ev.preventDefault();
    const file = form.querySelector('input[type="file"]').files[0];
    const state = form.querySelector('[role="status"]');
    form.querySelector('[role="alert"]').hidden = true;
    state.hidden = true;
    if (!file) { showError(form, "Choose the file first."); return; }
    const button = form.querySelector('[type="submit"]');
    button.disabled = true;
    const r = await postFile(form.dataset.upload, file);
    button.disabled = false;
    if (!r.ok) { showError(form, words(r)); return; }
    const d = r.data;
    const refused = (d.refusals || []).map((x) => `line ${x.line}: ${x.url} (${x.error})`).join("; ");
    state.textContent = `Followed ${d.added} feed${d.added === 1 ? "" : "s"}; ${d.already_followed} already followed; ${d.refused} refused${refused ? `: ${refused}` : ""}.`;
    state.hidden = false;
  });

  // Imports: the file goes as multipart/form-data; the list below polls its progress while it runs.
  document.addEventListener("submit", async (ev) => {
    const form = ev.target.closest("#import-form");
    if (!form) return;
    ev.preventDefault();
    const file = form.querySelector('input[type="file"]').files[0];
    const err = form.querySelector('[role="alert"]');
    err.hidden = true;
    if (!file) { showError(form, "Choose the export file first."); return; }
    const data = new FormData();
    data.append("file", file);
    const button = form.querySelector('[type="submit"]');
    button.disabled = true;
    let r;
    try {
      const res = await fetch("/api/v1/imports", { method: "POST", body: data, credentials: "same-origin",
        headers: { "X-CSRF-Token": csrf(), Accept: "application/json" } });
      let d = {};
      try { d = await res.json(); } catch (e) { /* empty body */ }
      r = { ok: res.ok, status: res.status, data: d };
    } catch (e) {
      r = { ok: false, status: 0, data: { message: "The server cannot be reached. Check your connection and try again." } };
    }
    button.disabled = false;
    if (!r.ok) { showError(form, r.data.error === "file_too_large" ? r.data.message : words(r)); return; }
    location.assign(`/import?started=${r.data.id}`);
  });

  window.Lev = { api, words, showError };

  // The service worker makes Lev installable (and a share target on phones); it caches nothing.
  if ("serviceWorker" in navigator) navigator.serviceWorker.register("/sw.js").catch(() => { /* not a secure context */ });
})();
