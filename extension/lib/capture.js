// What the extension reads from a tab. These functions run inside the page (chrome.scripting.executeScript), so
// each is self-contained.

/** The page as rendered: a copy of the DOM without scripts, styles and embedded frames, its title and URL. */
export function snapshotPage() {
  const copy = document.documentElement.cloneNode(true);
  copy.querySelectorAll("script, style, noscript, template, iframe, frame, object, embed, link").forEach((el) => el.remove());
  for (const el of copy.querySelectorAll("*")) {
    for (const name of el.getAttributeNames()) {
      if (name === "style" || name.startsWith("on")) el.removeAttribute(name);
    }
  }
  return { html: "<!doctype html>\n" + copy.outerHTML, title: document.title, url: location.href,
    contentType: document.contentType };
}

/** The selected text, with the page's title and URL. */
export function snapshotSelection() {
  const selection = window.getSelection();
  return { text: selection ? selection.toString() : "", title: document.title, url: location.href };
}
