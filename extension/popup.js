// The toolbar popup: what Lev knows about the current page, a folder, tags for what it saves (the last ones used
// offered again), the three save buttons and "Highlight selection" with an optional note. It only sends
// messages to the service worker (background.js), which does the work. `popup.html?tab=ID` acts on that tab (how the
// tests open the popup as a page of its own).
const $ = (sel) => document.querySelector(sel);
const send = (msg) => chrome.runtime.sendMessage(msg);

async function targetTab() {
  const asked = new URLSearchParams(location.search).get("tab");
  if (asked) return chrome.tabs.get(Number(asked));
  const [tab] = await chrome.tabs.query({ active: true, currentWindow: true });
  return tab;
}

function say(el, text) {
  for (const box of [$("#result"), $("#problem")]) box.hidden = true;
  if (el) { el.textContent = text; el.hidden = false; }
}

function showStatus(st) {
  const box = $("#page-state");
  box.classList.toggle("saved", Boolean(st.saved));
  if (st.unsupported) box.textContent = "This is not a web page: Lev saves http and https pages.";
  else if (!st.ok) box.textContent = st.message;
  else box.textContent = st.saved ? "✓ Already in your library." : "Not in your library yet.";
  $("#open-item").hidden = !st.saved;
  if (st.saved) $("#item-link").href = st.item_url;
}

async function main() {
  const state = await send({ type: "lev:state" });
  if (!state.connected) {
    $("#connect").hidden = false;
    $('[data-lev="settings"]').addEventListener("click", () => chrome.runtime.openOptionsPage());
    return;
  }
  $("#main").hidden = false;
  const tab = await targetTab();
  $("#page-title").textContent = tab.title || tab.url || "";
  const folderSelect = $('[data-lev="folder"]');
  const [st, fl] = await Promise.all([send({ type: "lev:status", tabId: tab.id }), send({ type: "lev:folders" })]);
  showStatus(st);
  if (fl.ok) {
    for (const f of fl.folders) folderSelect.add(new Option(f.name, f.id));
  }
  const { lastFolder } = await chrome.storage.local.get("lastFolder");
  if (lastFolder && [...folderSelect.options].some((o) => o.value === lastFolder)) folderSelect.value = lastFolder;
  folderSelect.addEventListener("change", () => chrome.storage.local.set({ lastFolder: folderSelect.value }));
  const tagField = $('[data-lev="tags"]');
  const typed = () => tagField.value.split(",").map((t) => t.trim()).filter((t) => t);
  async function showRecent() {
    const { recentTags = [] } = await chrome.storage.local.get("recentTags");
    const box = $('[data-lev="recent-tags"]');
    box.replaceChildren(...recentTags.map((name) => {
      const b = document.createElement("button");
      b.type = "button"; b.className = "chip"; b.textContent = name; b.dataset.lev = "recent-tag";
      b.setAttribute("aria-label", `Add the tag ${name}`);
      b.addEventListener("click", () => {
        const have = typed();
        if (!have.some((t) => t.toLowerCase() === name.toLowerCase())) tagField.value = [...have, name].join(", ");
      });
      return b;
    }));
    $("#recent-tags-h").hidden = !recentTags.length;
  }
  async function remember(tags) { // the ten last used, newest first
    const { recentTags = [] } = await chrome.storage.local.get("recentTags");
    const keep = [...tags, ...recentTags.filter((t) => !tags.some((n) => n.toLowerCase() === t.toLowerCase()))];
    await chrome.storage.local.set({ recentTags: keep.slice(0, 10) });
    await showRecent();
  }
  await showRecent();
  const buttons = [...document.querySelectorAll("button[data-lev^='save-'], button[data-lev='highlight']")];

  async function run(button, msg, done) {
    buttons.forEach((b) => { b.disabled = true; });
    say(null);
    const folderId = folderSelect.value || undefined;
    const tags = msg.type === "lev:highlight" ? [] : typed();
    const answer = await send({ ...msg, folderId, ...(tags.length ? { tags } : {}) });
    buttons.forEach((b) => { b.disabled = false; });
    if (!answer.ok) { say($("#problem"), answer.message); return; }
    if (tags.length) await remember(tags);
    say($("#result"), done(answer));
    showStatus(await send({ type: "lev:status", tabId: tab.id }));
  }

  $('[data-lev="save-page"]').addEventListener("click", (ev) => run(ev.target, { type: "lev:save-page", tabId: tab.id },
    (a) => (a.status === "ready" ? "Saved: searchable now." : "Saved: Lev is still reading it.")));
  $('[data-lev="save-selection"]').addEventListener("click", (ev) => run(ev.target,
    { type: "lev:save-selection", tabId: tab.id }, () => "The selection is saved as a note."));
  $('[data-lev="highlight"]').addEventListener("click", (ev) => run(ev.target,
    { type: "lev:highlight", tabId: tab.id, note: $('[data-lev="note"]').value || undefined }, () => {
      $('[data-lev="note"]').value = "";
      return "Highlighted: it is marked on the item's page in Lev.";
    }));
  $('[data-lev="save-tabs"]').addEventListener("click", (ev) => {
    const bar = $("#progress");
    bar.hidden = false; bar.value = 0;
    run(ev.target, { type: "lev:save-tabs", windowId: tab.windowId }, (a) => {
      const extra = a.failed.length ? ` ${a.failed.length} could not be saved: ${a.failed.map((f) => f.message).join(" ")}` : "";
      return `Saved ${a.saved} tab${a.saved === 1 ? "" : "s"}.${extra}`;
    });
  });
  chrome.runtime.onMessage.addListener((msg) => {
    if (msg.type !== "lev:progress" || msg.windowId !== tab.windowId) return;
    const bar = $("#progress");
    bar.max = msg.total; bar.value = msg.done;
    $("#page-state").textContent = `Saving tabs: ${msg.done} of ${msg.total}…`;
  });
}

main();
