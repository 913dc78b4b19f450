// Talking to the configured Lev server, and only to it: the settings (chrome.storage.local: `server`, and either
// `token`, a pasted token, or `grant`, what Lev's OAuth consent gave the extension) and one request function that
// adds the credential, refreshes an OAuth grant's access token when it runs out, and turns answers into
// {ok: true, data} or {ok: false, error, message}.
import { fail, inWords } from "./errors.js";

export const REST = "/api/v1";

export async function settings() {
  const got = await chrome.storage.local.get(["server", "token", "grant"]);
  return { server: got.server || "", token: got.token || "", grant: got.grant || null };
}

/** The server's base URL as the user typed it, cleaned: scheme, host, port and path, no trailing slash. */
export function normalizeServer(raw) {
  let url;
  try { url = new URL(String(raw || "").trim()); } catch (e) { return null; }
  if (url.protocol !== "http:" && url.protocol !== "https:") return null;
  return (url.origin + url.pathname).replace(/\/+$/, "");
}

/** `path` on the server, refusing anything that would leave the server's origin (the token goes nowhere else). */
export function onServer(server, path) {
  const url = new URL(server + path);
  if (url.origin !== new URL(server).origin) throw new Error("not on the Lev server");
  return url.toString();
}

let refreshing = null; // one refresh at a time: a refresh token is good once, a second use revokes the grant

async function refreshGrant(server, grant) {
  if (!refreshing) {
    refreshing = (async () => {
      const form = new URLSearchParams({ grant_type: "refresh_token", refresh_token: grant.refresh_token,
        client_id: grant.client_id, resource: server + REST });
      let res;
      try {
        res = await fetch(onServer(server, grant.token_path), { method: "POST", body: form, credentials: "omit",
          headers: { "Content-Type": "application/x-www-form-urlencoded", Accept: "application/json" } });
      } catch (e) { return null; }
      if (!res.ok) { await chrome.storage.local.remove("grant"); return null; }
      const t = await res.json();
      const next = { ...grant, access_token: t.access_token, refresh_token: t.refresh_token, scope: t.scope,
        expires_at: Date.now() + (t.expires_in || 3600) * 1000 };
      await chrome.storage.local.set({ grant: next });
      return next;
    })().finally(() => { refreshing = null; });
  }
  return refreshing;
}

async function credential(s, { forceRefresh = false } = {}) {
  if (s.token) return s.token;
  if (!s.grant) return null;
  let grant = s.grant;
  if (forceRefresh || !grant.access_token || grant.expires_at < Date.now() + 30_000) {
    grant = await refreshGrant(s.server, grant);
  }
  return grant ? grant.access_token : null;
}

/** One call of Lev's REST API: {ok: true, status, data} or {ok: false, error, message}. */
export async function api(method, path, body) {
  const s = await settings();
  if (!s.server || (!s.token && !s.grant)) {
    return fail("not_connected", "Connect the extension to your Lev server first: open its settings.");
  }
  for (let attempt = 0; attempt < 2; attempt++) {
    const bearer = await credential(s, { forceRefresh: attempt > 0 });
    if (!bearer) return inWords(401, { error: "invalid_token" });
    // credentials "omit": the bearer alone speaks for the extension, never a Lev session cookie of this browser
    const init = { method, credentials: "omit", headers: { Authorization: `Bearer ${bearer}`, Accept: "application/json" } };
    if (body !== undefined) { init.headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
    let res;
    try {
      res = await fetch(onServer(s.server, REST + path), init);
    } catch (e) {
      return fail("unreachable", `Lev cannot be reached at ${s.server}. Check the address in the settings and your connection.`);
    }
    let data = {};
    try { data = await res.json(); } catch (e) { /* no JSON body */ }
    if (res.ok) return { ok: true, status: res.status, data };
    if (res.status === 401 && s.grant && attempt === 0) {
      s.grant = (await settings()).grant; // maybe refreshed meanwhile by another request
      if (s.grant) continue;
    }
    return inWords(res.status, data);
  }
  return inWords(401, { error: "invalid_token" });
}
