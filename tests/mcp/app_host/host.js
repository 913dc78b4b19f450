// A minimal MCP Apps host for the tests, built on the official @modelcontextprotocol/ext-apps AppBridge: an MCP
// client (the official SDK) connected to Lev through the test server's same-origin /mcp proxy, the UI resource read
// from Lev and rendered in a sandboxed iframe, and the bridge between them. Bundled by esbuild (tests/mcp/
// test_mcp_app.py); the test drives it through window.levHost.
import { AppBridge, PostMessageTransport, getToolUiResourceUri } from "@modelcontextprotocol/ext-apps/app-bridge";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const EXTENSION = "io.modelcontextprotocol/ui";
const MIME = "text/html;profile=mcp-app";
const state = { opened: [], sizes: [], initialized: 0, serverCapabilities: null, resource: null };

async function connect() {
  const client = new Client({ name: "lev-test-host", version: "1.0.0" },
                            { capabilities: { extensions: { [EXTENSION]: { mimeTypes: [MIME] } } } });
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", window.location.href)));
  state.serverCapabilities = client.getServerCapabilities();
  return client;
}

// The view's Content Security Policy from its resource metadata, as hosts build it: no origin unless declared.
function policy(csp) {
  const list = (domains) => (domains && domains.length ? domains.join(" ") : "'none'");
  return `default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; ` +
    `connect-src ${list(csp.connectDomains)}; font-src ${list(csp.resourceDomains)}; ` +
    `frame-src ${list(csp.frameDomains)}; base-uri 'none'`;
}

async function show(client, toolName, args, hostContext) {
  const { tools } = await client.listTools();
  const tool = tools.find((t) => t.name === toolName);
  const uri = getToolUiResourceUri(tool);
  const read = await client.readResource({ uri });
  const content = read.contents[0];
  state.resource = { uri, mimeType: content.mimeType, bytes: content.text.length };
  if (content.mimeType !== MIME) throw new Error(`unexpected mime type ${content.mimeType}`);

  const frame = document.createElement("iframe");
  frame.setAttribute("sandbox", "allow-scripts");
  frame.setAttribute("title", "Lev results");
  document.getElementById("conversation").replaceChildren(frame);

  const bridge = new AppBridge(client, { name: "lev-test-host", version: "1.0.0" },
                               { openLinks: {}, serverTools: {}, logging: {} }, { hostContext });
  bridge.onopenlink = async ({ url }) => { state.opened.push(url); return {}; };
  bridge.onsizechange = ({ height }) => { state.sizes.push(height); if (height) frame.style.height = `${height}px`; };
  const ready = new Promise((resolve) => { bridge.oninitialized = () => { state.initialized += 1; resolve(); }; });
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  const csp = (content._meta && content._meta.ui && content._meta.ui.csp) || {};
  const meta = `<meta http-equiv="Content-Security-Policy" content="${policy(csp)}">`;
  frame.srcdoc = content.text.replace(/<head>/i, `<head>${meta}`);
  await ready;
  bridge.sendToolInput({ arguments: args });
  const result = await client.callTool({ name: toolName, arguments: args });
  await bridge.sendToolResult(result);
  return { isError: Boolean(result.isError) };
}

let clientPromise = null;
window.levHost = {
  state,
  async run(toolName, args, hostContext) {
    clientPromise = clientPromise || connect();
    return show(await clientPromise, toolName, args, hostContext || {});
  },
};
