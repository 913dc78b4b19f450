// The settings page: the server's address, and a connection either through Lev's OAuth consent or with a pasted
// token. The service worker (background.js) does the connecting; the token is kept in chrome.storage.local and sent
// to that server only.
const $ = (sel) => document.querySelector(sel);
const send = (msg) => chrome.runtime.sendMessage(msg);

function say(el, text) {
  for (const box of [$("#result"), $("#problem")]) box.hidden = true;
  if (el) { el.textContent = text; el.hidden = false; }
}

async function showState() {
  const st = await send({ type: "lev:state" });
  if (st.server && !$("#server").value) $("#server").value = st.server;
  const box = $("#connection");
  if (st.connected === "oauth") {
    box.textContent = `Connected to ${st.server} through Lev's consent page as “${st.client_name}”` +
      (st.write ? "." : ", read-only: connect again and tick write to save pages.");
  } else if (st.connected === "token") {
    box.textContent = `Connected to ${st.server} with a pasted token.`;
  } else {
    box.textContent = "Not connected.";
  }
  $('[data-lev="disconnect"]').disabled = !st.connected;
}

async function act(button, msg, done) {
  button.disabled = true;
  say(null);
  const answer = await send(msg);
  button.disabled = false;
  if (answer.ok) say($("#result"), done(answer));
  else say($("#problem"), answer.message);
  await showState();
}

$('[data-lev="connect"]').addEventListener("click", (ev) => act(ev.target, { type: "lev:connect", server: $("#server").value },
  (a) => (a.write ? "Connected. The toolbar button saves pages now." : "Connected, but read-only: saving needs write.")));
$('[data-lev="use-token"]').addEventListener("click", (ev) => act(ev.target,
  { type: "lev:use-token", server: $("#server").value, token: $("#token").value },
  (a) => { $("#token").value = ""; return a.write ? `Token “${a.name}” saved.` : `Token “${a.name}” saved, but it can only read: saving needs write.`; }));
$('[data-lev="disconnect"]').addEventListener("click", (ev) => act(ev.target, { type: "lev:disconnect" },
  () => "Disconnected."));

showState();
