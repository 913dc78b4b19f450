// The extension's service worker does the work; the popup and the settings page only send it messages:
//   {type: "lev:save-page", tabId, folderId?, tags?}      the page as the browser rendered it (kind page)
//   {type: "lev:save-selection", tabId, folderId?, tags?} the selected text as a note that keeps the page's URL, title
//   {type: "lev:save-tabs", windowId, folderId?, tags?}   every web page of the window, with lev:progress messages
//   {type: "lev:status", tabId}                    is the tab's page in the library already?
//   {type: "lev:save-link", url, folderId?, tags?} a link, fetched by Lev itself (the context menu's entry)
//   (tags: names for what is saved, nested with "/"; added to an item the page already is)
//   {type: "lev:highlight", tabId, note?, folderId?} the selection as a highlight of the page's item (the page saved
//                                                  first when it is not in the library yet) -> {ok, item_id,
//                                                  highlight_id}
//   {type: "lev:folders"}, {type: "lev:state"}, {type: "lev:connect", server}, {type: "lev:use-token", server,
//   token}, {type: "lev:disconnect"}
// Each answers {ok: true, ...} or {ok: false, error, message} (Lev's error code, said in words).
import { api, normalizeServer, settings } from "./lib/api.js";
import { snapshotPage, snapshotSelection } from "./lib/capture.js";
import { fail, inWords } from "./lib/errors.js";
import { CLIENT_NAME, connect, disconnect } from "./lib/oauth.js";

const MAX_HTML_BYTES = 5 * 1024 * 1024;
const STATUS_TTL_MS = 60_000;
const PARALLEL_TABS = 2;
const MENU_ID = "lev-save-link";
const HIGHLIGHT_MENU_ID = "lev-highlight";
const MAX_HIGHLIGHT_CHARS = 20000;
const known = new Map(); // url -> {at, answer}: the toolbar asks Lev at most once a minute per page

const isWeb = (url) => /^https?:\/\//i.test(url || "");
const notWeb = () => fail("unsupported_page", "Lev can save web pages (http or https) only, not this browser page.");

function ingestAnswer(r) {
  return { ok: true, item_id: r.data.user_item_id, status: r.data.status, saved: true };
}

async function setBadge(tabId, saved) {
  try {
    await chrome.action.setBadgeBackgroundColor({ tabId, color: "#1e7b3a" });
    await chrome.action.setBadgeText({ tabId, text: saved ? "✓" : "" });
    await chrome.action.setTitle({ tabId, title: saved ? "Lev: this page is in your library" : "Save to Lev" });
  } catch (e) { /* the tab is gone */ }
}

async function statusOf(url) {
  const cached = known.get(url);
  if (cached && Date.now() - cached.at < STATUS_TTL_MS) return cached.answer;
  const r = await api("GET", "/items?" + new URLSearchParams({ url, per_page: "1" }));
  if (!r.ok) return r;
  const item = r.data.items[0];
  const { server } = await settings();
  const answer = item ? { ok: true, saved: true, item_id: item.id, status: item.status, title: item.title,
    item_url: `${server}/items/${item.id}` } : { ok: true, saved: false, status: null };
  known.set(url, { at: Date.now(), answer });
  return answer;
}

async function status(tabId) {
  const tab = await chrome.tabs.get(tabId);
  if (!isWeb(tab.url)) return { ok: true, saved: false, status: null, unsupported: true };
  const answer = await statusOf(tab.url);
  if (answer.ok) await setBadge(tabId, answer.saved);
  return answer;
}

async function ingest(body, folderId, tags) {
  return api("POST", "/ingest", { ...body, ...(folderId ? { folder_id: folderId } : {}),
    ...(tags && tags.length ? { tags } : {}) });
}

async function saved(tabId, url, r) {
  if (!r.ok) return r;
  known.delete(url);
  if (tabId !== undefined) await setBadge(tabId, true);
  return ingestAnswer(r);
}

async function inTab(tabId, func) {
  try {
    const [frame] = await chrome.scripting.executeScript({ target: { tabId }, func });
    return frame ? frame.result : null;
  } catch (e) {
    return null; // a discarded tab, the Web Store, a PDF viewer...: the page cannot be read here
  }
}

async function saveLink(url, folderId, tabId, tags) {
  if (!isWeb(url)) return notWeb();
  return saved(tabId, url, await ingest({ kind: "url", url }, folderId, tags));
}

async function savePage(tabId, folderId, tags) {
  const tab = await chrome.tabs.get(tabId);
  if (!isWeb(tab.url)) return notWeb();
  const page = await inTab(tabId, snapshotPage);
  if (!page || !/html/i.test(page.contentType || "")) {
    return saveLink(tab.url, folderId, tabId, tags); // not an HTML page the browser shows (a PDF...): Lev fetches it
  }
  if (new TextEncoder().encode(page.html).length > MAX_HTML_BYTES) return inWords(413, { error: "file_too_large" });
  return saved(tabId, tab.url, await ingest({ kind: "page", url: page.url, html: page.html }, folderId, tags));
}

async function saveSelection(tabId, folderId, tags) {
  const tab = await chrome.tabs.get(tabId);
  if (!isWeb(tab.url)) return notWeb();
  const sel = await inTab(tabId, snapshotSelection);
  if (!sel || !sel.text.trim()) return fail("nothing_selected", "Select some text on the page first.");
  const body = { kind: "text", text: sel.text.trim(), source_url: sel.url };
  if (sel.title.trim()) body.title = sel.title.trim().slice(0, 500);
  return saved(tabId, tab.url, await ingest(body, folderId, tags));
}

// The selection as a highlight of the page's item. The page is saved first (as Save page does) when it is not in
// the library; when Lev's copy does not hold the words (Lev fetched the page itself, or the page changed), the
// page as the browser shows it is saved again and the highlight tried once more.
async function highlight(tabId, note, folderId) {
  const tab = await chrome.tabs.get(tabId);
  if (!isWeb(tab.url)) return notWeb();
  const sel = await inTab(tabId, snapshotSelection);
  const words = sel ? sel.text.trim() : "";
  if (!words) return fail("nothing_selected", "Select some text on the page first.");
  if (words.length > MAX_HIGHLIGHT_CHARS) {
    return fail("selection_too_long", `Lev highlights at most ${MAX_HIGHLIGHT_CHARS.toLocaleString("en")} characters at once: select less.`);
  }
  const body = { text: words, ...(note && note.trim() ? { note: note.trim() } : {}) };
  let st = await statusOf(tab.url);
  if (!st.ok) return st;
  let fresh = false;
  if (!st.saved) {
    const made = await savePage(tabId, folderId);
    if (!made.ok) return made;
    st = { item_id: made.item_id };
    fresh = true;
  }
  let r = await api("POST", `/items/${st.item_id}/highlights`, body);
  if (!r.ok && (r.error === "words_not_found" || r.error === "invalid_body") && !fresh) { // invalid_body: Lev before 409
    const made = await savePage(tabId, folderId); // Lev's copy lacks the words: keep the page as it is shown now
    if (!made.ok) return made;
    st = { item_id: made.item_id };
    r = await api("POST", `/items/${st.item_id}/highlights`, body);
  }
  if (!r.ok) return r;
  known.delete(tab.url);
  return { ok: true, item_id: st.item_id, highlight_id: r.data.id };
}

async function saveTabs(windowId, folderId, tags) {
  const tabs = (await chrome.tabs.query({ windowId })).filter((t) => isWeb(t.url));
  if (!tabs.length) return fail("unsupported_page", "This window has no web pages to save.");
  const results = new Array(tabs.length);
  let next = 0;
  let done = 0;
  const progress = (tab) => chrome.runtime.sendMessage({ type: "lev:progress", windowId, done, total: tabs.length,
    url: tab.url }).catch(() => { /* the popup is closed */ });
  async function worker() {
    while (next < tabs.length) {
      const i = next++;
      results[i] = await savePage(tabs[i].id, folderId, tags);
      done += 1;
      await progress(tabs[i]);
    }
  }
  await Promise.all(Array.from({ length: Math.min(PARALLEL_TABS, tabs.length) }, worker));
  const good = results.filter((r) => r.ok);
  const failed = results.map((r, i) => (r.ok ? null : { url: tabs[i].url, error: r.error, message: r.message }))
    .filter(Boolean);
  if (!good.length) return { ...results[0], failed };
  return { ok: true, item_ids: good.map((r) => r.item_id), saved: good.length, failed,
    status: good.every((r) => r.status === "ready") ? "ready" : "processing" };
}

async function folders() {
  const r = await api("GET", "/folders");
  return r.ok ? { ok: true, folders: r.data.folders.map((f) => ({ id: f.id, name: f.name })) } : r;
}

async function state() {
  const s = await settings();
  return { ok: true, server: s.server, connected: s.token ? "token" : s.grant ? "oauth" : null,
    write: s.grant ? (s.grant.scope || "").split(" ").includes("lev:write") : null, client_name: CLIENT_NAME };
}

async function useToken(rawServer, token) {
  const server = normalizeServer(rawServer);
  if (!server) return fail("invalid_server", "Enter your Lev server's address, e.g. https://lev.example.com.");
  if (!/^lev_[A-Za-z0-9_-]{20,}$/.test((token || "").trim())) {
    return fail("invalid_token", "A Lev token starts with lev_: mint one under Settings → Integrations on your server.");
  }
  const previous = await chrome.storage.local.get(["server", "token", "grant"]);
  await chrome.storage.local.set({ server, token: token.trim() });
  await chrome.storage.local.remove("grant");
  const r = await api("GET", "/token");
  if (!r.ok) {
    await chrome.storage.local.set(previous);
    if (!previous.token) await chrome.storage.local.remove("token");
    return r;
  }
  known.clear();
  return { ok: true, name: r.data.name, write: r.data.capabilities.includes("write") };
}

async function handle(msg) {
  switch (msg && msg.type) {
    case "lev:save-page": return savePage(msg.tabId, msg.folderId, msg.tags);
    case "lev:save-selection": return saveSelection(msg.tabId, msg.folderId, msg.tags);
    case "lev:save-tabs": return saveTabs(msg.windowId, msg.folderId, msg.tags);
    case "lev:status": return status(msg.tabId);
    case "lev:save-link": return saveLink(msg.url, msg.folderId, msg.tabId, msg.tags);
    case "lev:highlight": return highlight(msg.tabId, msg.note, msg.folderId);
    case "lev:folders": return folders();
    case "lev:state": return state();
    case "lev:connect": known.clear(); return connect(msg.server);
    case "lev:use-token": return useToken(msg.server, msg.token);
    case "lev:disconnect": known.clear(); return disconnect();
    default: return fail("unknown_message", `Unknown message ${msg && msg.type}.`);
  }
}

chrome.runtime.onMessage.addListener((msg, sender, reply) => {
  if (sender.id !== chrome.runtime.id || (msg && msg.type === "lev:progress")) return false;
  handle(msg).then(reply, (e) => reply(fail("extension_error", `The extension failed: ${e && e.message}`)));
  return true;
});

chrome.runtime.onInstalled.addListener(() => {
  chrome.contextMenus.create({ id: MENU_ID, title: "Save link to Lev", contexts: ["link"] }, () => void chrome.runtime.lastError);
  chrome.contextMenus.create({ id: HIGHLIGHT_MENU_ID, title: "Highlight selection in Lev", contexts: ["selection"] },
    () => void chrome.runtime.lastError);
});

/** What a context-menu entry does; the badge on its tab says how it went (the menu has no other place to answer). */
export async function menuAction(info, tab) {
  const tabId = tab && tab.id >= 0 ? tab.id : undefined;
  if (info.menuItemId === HIGHLIGHT_MENU_ID) {
    if (tabId === undefined) return fail("unsupported_page", "Lev can highlight on web pages only.");
    const r = await highlight(tabId, undefined, undefined);
    await chrome.action.setBadgeBackgroundColor({ tabId, color: r.ok ? "#1e7b3a" : "#b3261e" });
    await chrome.action.setBadgeText({ tabId, text: r.ok ? "✎" : "!" });
    await chrome.action.setTitle({ tabId, title: r.ok ? "Lev saved the highlight" : `Lev: ${r.message}` });
    return r;
  }
  if (info.menuItemId !== MENU_ID) return null;
  const r = await saveLink(info.linkUrl, undefined, undefined);
  if (tabId === undefined) return r;
  await chrome.action.setBadgeBackgroundColor({ tabId, color: r.ok ? "#1e7b3a" : "#b3261e" });
  await chrome.action.setBadgeText({ tabId, text: r.ok ? "+1" : "!" });
  await chrome.action.setTitle({ tabId, title: r.ok ? "Lev saved the link" : `Lev: ${r.message}` });
  return r;
}

chrome.contextMenus.onClicked.addListener((info, tab) => { menuAction(info, tab); });
globalThis.levMenuAction = menuAction; // for the tests, which cannot click a native menu

async function refreshBadge(tab) {
  if (!tab || tab.id === undefined || !isWeb(tab.url)) return;
  const s = await settings();
  if (!s.server || (!s.token && !s.grant)) return;
  const r = await statusOf(tab.url);
  if (r.ok) await setBadge(tab.id, r.saved);
}

chrome.tabs.onUpdated.addListener((tabId, info, tab) => { if (info.status === "complete") refreshBadge(tab); });
chrome.tabs.onActivated.addListener(({ tabId }) => { chrome.tabs.get(tabId).then(refreshBadge, () => {}); });
