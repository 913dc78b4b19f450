// Connecting through Lev's own OAuth consent, as an agent would: the extension registers itself with the server
// (RFC 7591; its redirect is chrome.identity's https://<extension-id>.chromiumapp.org/), then runs the
// authorization code flow with PKCE in chrome.identity.launchWebAuthFlow. The consent page names the extension and
// lets the user choose folders, write and expiry; the grant is for Lev's REST API and is listed (and revocable)
// under Settings -> Integrations -> Connected apps.
import { fail } from "./errors.js";
import { REST, normalizeServer, onServer } from "./api.js";

export const CLIENT_NAME = "Lev browser extension";
const SCOPE = "lev:read lev:write";

const b64url = (bytes) => btoa(String.fromCharCode(...new Uint8Array(bytes)))
  .replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
const random = (n) => b64url(crypto.getRandomValues(new Uint8Array(n)));

async function json(url, init) {
  const res = await fetch(url, { ...init, credentials: "omit",
    headers: { Accept: "application/json", ...(init && init.headers) } });
  let data = {};
  try { data = await res.json(); } catch (e) { /* not JSON */ }
  return { ok: res.ok, status: res.status, data };
}

/** The path of an endpoint the server's metadata names, refused when it is not on the server itself. */
function samePath(server, endpoint) {
  const url = new URL(endpoint);
  if (url.origin !== new URL(server).origin) throw new Error(`the server names an endpoint elsewhere (${url.origin})`);
  return url.pathname;
}

async function registered(server, meta, redirectUri) {
  const { clients = {} } = await chrome.storage.local.get("clients");
  const known = clients[server];
  if (known && known.redirect_uri === redirectUri) return known.client_id;
  const r = await json(onServer(server, samePath(server, meta.registration_endpoint)), {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ client_name: CLIENT_NAME, redirect_uris: [redirectUri], token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"], response_types: ["code"], scope: SCOPE }),
  });
  if (!r.ok) throw new Error(r.data.error_description || `registration answered HTTP ${r.status}`);
  clients[server] = { client_id: r.data.client_id, redirect_uri: redirectUri };
  await chrome.storage.local.set({ clients });
  return r.data.client_id;
}

async function forgetClient(server) {
  const { clients = {} } = await chrome.storage.local.get("clients");
  delete clients[server];
  await chrome.storage.local.set({ clients });
}

/** Connect to `rawServer` through its consent page; {ok, scope, write} or {ok: false, error, message}. */
export async function connect(rawServer) {
  const server = normalizeServer(rawServer);
  if (!server) return fail("invalid_server", "Enter your Lev server's address, e.g. https://lev.example.com.");
  let meta;
  try {
    const r = await json(onServer(server, "/.well-known/oauth-authorization-server"));
    if (!r.ok) return fail("not_lev", `${server} does not look like a Lev server (HTTP ${r.status}).`);
    meta = r.data;
  } catch (e) {
    return fail("unreachable", `Lev cannot be reached at ${server}. Check the address and your connection.`);
  }
  const redirectUri = chrome.identity.getRedirectURL();
  let clientId, authorizePath, tokenPath;
  try {
    clientId = await registered(server, meta, redirectUri);
    authorizePath = samePath(server, meta.authorization_endpoint);
    tokenPath = samePath(server, meta.token_endpoint);
  } catch (e) {
    return fail("connect_failed", `Could not register with ${server}: ${e.message}.`);
  }
  const verifier = random(48);
  const challenge = b64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
  const state = random(16);
  const query = new URLSearchParams({ response_type: "code", client_id: clientId, redirect_uri: redirectUri,
    scope: SCOPE, state, code_challenge: challenge, code_challenge_method: "S256", resource: server + REST });
  let back;
  try {
    back = new URL(await chrome.identity.launchWebAuthFlow({ url: onServer(server, authorizePath) + "?" + query,
      interactive: true }));
  } catch (e) {
    await forgetClient(server); // the next attempt registers afresh (a server reset forgets its clients)
    return fail("connect_cancelled", "The connection was not completed: the window was closed before \"Allow\".");
  }
  const answer = back.searchParams;
  if (answer.get("state") !== state || (meta.issuer && answer.get("iss") && answer.get("iss") !== meta.issuer)) {
    return fail("connect_failed", "Lev's answer did not match this request; try connecting again.");
  }
  if (answer.get("error")) {
    const denied = answer.get("error") === "access_denied";
    return fail(denied ? "access_denied" : answer.get("error"),
      denied ? "You chose Deny: the extension is not connected." : `Lev refused: ${answer.get("error_description")}`);
  }
  const form = new URLSearchParams({ grant_type: "authorization_code", code: answer.get("code"),
    code_verifier: verifier, client_id: clientId, redirect_uri: redirectUri, resource: server + REST });
  const t = await json(onServer(server, tokenPath), { method: "POST", body: form,
    headers: { "Content-Type": "application/x-www-form-urlencoded" } });
  if (!t.ok) return fail("connect_failed", `Lev did not issue the connection: ${t.data.error_description || t.status}.`);
  const grant = { access_token: t.data.access_token, refresh_token: t.data.refresh_token, scope: t.data.scope,
    expires_at: Date.now() + (t.data.expires_in || 3600) * 1000, client_id: clientId, token_path: tokenPath,
    revoke_path: meta.revocation_endpoint ? samePath(server, meta.revocation_endpoint) : null };
  await chrome.storage.local.set({ server, grant });
  await chrome.storage.local.remove("token");
  const write = (grant.scope || "").split(" ").includes("lev:write");
  return { ok: true, scope: grant.scope, write };
}

/** Forget the connection; an OAuth grant is revoked on the server first (RFC 7009). */
export async function disconnect() {
  const { server, grant } = await chrome.storage.local.get(["server", "grant"]);
  if (server && grant && grant.revoke_path) {
    try {
      await fetch(onServer(server, grant.revoke_path), { method: "POST", credentials: "omit",
        headers: { "Content-Type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ token: grant.refresh_token, client_id: grant.client_id }) });
    } catch (e) { /* offline: the grant still ends at its expiry, or by Revoke on the Integrations page */ }
  }
  await chrome.storage.local.remove(["token", "grant"]);
  return { ok: true };
}
