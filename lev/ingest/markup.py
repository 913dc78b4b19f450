"""Text formats read into a `Layout`: Markdown (markdown-it-py; YAML front matter's title, tags, date and aliases
into the metadata, `[[wiki links]]` kept as links), HTML (lxml's HTML parser, which expands no declared entity and
fetches nothing: headings, lists, tables and paragraphs in order; a saved page's `<main>` or `<article>` when it has
one), plain text; and the decoding every text format shares."""

from __future__ import annotations

import codecs
import datetime as dt
import re
from typing import Any

import lxml.html
import yaml
from lxml import etree
from markdown_it import MarkdownIt
from markdown_it.token import Token

from lev.core.errors import extraction_failed
from lev.ingest.layout import Document, Layout, one_line

FRONT_MATTER_MAX = 64 * 1024
MAX_LINKS = 1000
MAX_TAGS = 100
_FRONT = re.compile(r"\A---[ \t]*\n(.*?\n)?(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_WIKI = re.compile(r"(!?)\[\[([^\[\]\n|]+?)(?:\|([^\[\]\n]*))?\]\]")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]{1,40})""", re.IGNORECASE)
_XML_DECL = re.compile(r"\A\s*<\?xml[^>]*\?>")
_SKIP = frozenset({"script", "style", "noscript", "template", "svg", "math", "iframe", "object", "embed", "canvas",
                   "button", "select", "nav", "footer", "aside", "head", "title"})
_BLOCKS = frozenset({"p", "div", "section", "article", "main", "header", "blockquote", "address", "figure",
                     "figcaption", "dd", "dt", "dl", "center", "details", "summary", "body", "html", "form",
                     "fieldset", "hgroup", "caption", "tr", "td", "th", "tbody", "thead", "tfoot", "li"})
_HEADINGS = {f"h{n}": n for n in range(1, 7)}


def decode(data: bytes, declared: str | None = None) -> str:
    """Text of a text file: by its byte-order mark, else its declared charset, else UTF-8, else Windows-1252."""
    for bom, codec in ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
                       (codecs.BOM_UTF16_BE, "utf-16-be")):
        if data.startswith(bom):
            return data[len(bom):].decode(codec, errors="replace")
    for codec in (declared or "utf-8", "utf-8"):
        try:
            return data.decode(codec)
        except (UnicodeDecodeError, LookupError):
            continue
    return data.decode("cp1252", errors="replace")


def read_text(data: bytes, mime: str, name: str, max_chars: int) -> Document:
    """Plain text (and JSON, YAML, logs) as it is."""
    layout = Layout(max_chars)
    layout.block(decode(data).replace("\x00", ""))
    return layout.document("text", None, {"format": "text"})


# ---------------------------------------------------------------------------------------------------------- Markdown

def _markdown() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def front_matter(text: str) -> tuple[dict[str, Any], str]:
    """The YAML front matter (title, tags, date, aliases and other plain values, checked) and the text after it."""
    found = _FRONT.match(text[:FRONT_MATTER_MAX + 16])
    if found is None:
        return {}, text
    try:
        raw = yaml.safe_load(found.group(1) or "")
    except yaml.YAMLError:
        return {}, text[found.end():]
    return (_checked(raw) if isinstance(raw, dict) else {}), text[found.end():]


def _plain(value: Any) -> Any:
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, bool) or isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        return value[:1000]
    return None


def _strings(value: Any, limit: int) -> list[str]:
    """A list of strings from a list or a comma-separated string (nested values left out)."""
    items = value if isinstance(value, list) else re.split(r"[,\s]+", value) if isinstance(value, str) else []
    out: list[str] = []
    for item in items:
        if isinstance(item, (str, int, float)) and not isinstance(item, bool):
            name = one_line(str(item)).lstrip("#")[:200]
            if name and name not in out:
                out.append(name)
        if len(out) >= limit:
            break
    return out


def _checked(raw: dict[Any, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    other: dict[str, Any] = {}
    for key, value in list(raw.items())[:100]:
        name = str(key).strip().lower()
        if name == "title" and _plain(value) is not None:
            out["title"] = one_line(str(_plain(value)))[:500]
        elif name in ("tags", "tag"):
            out["tags"] = _strings(value, MAX_TAGS)
        elif name in ("aliases", "alias"):
            out["aliases"] = [one_line(a) for a in _strings(value if isinstance(value, list) else [value], 100)]
        elif name == "date" and _plain(value) is not None:
            out["date"] = str(_plain(value))
        elif _plain(value) is not None and len(other) < 50:
            other[str(key)[:100]] = _plain(value)
    if other:
        out["front_matter"] = other
    return out


class _Wiki:
    """`[[Note]]`, `[[Note|shown]]`, `[[Note#Part]]`, `![[embedded]]`: their shown words in the text, their targets
    collected."""

    def __init__(self) -> None:
        self.links: list[str] = []

    def sub(self, text: str) -> str:
        return _WIKI.sub(self._one, text) if "[[" in text else text

    def _one(self, m: re.Match[str]) -> str:
        target = m.group(2).strip()
        name = target.split("#", 1)[0].strip() or target
        if name and name not in self.links and len(self.links) < MAX_LINKS:
            self.links.append(name)
        shown = (m.group(3) or "").strip()
        return shown or target.replace("#", " > ")


def _inline(token: Token, wiki: _Wiki) -> str:
    """An inline token's words: text (wiki links shown), code, link texts, image alt texts; breaks as spaces."""
    parts: list[str] = []
    pending: list[str] = []
    for child in token.children or []:
        if child.type == "text":
            pending.append(child.content)
            continue
        if pending:
            parts.append(wiki.sub("".join(pending)))
            pending = []
        if child.type == "code_inline":
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type == "image":
            parts.append(child.content or "")
    if pending:
        parts.append(wiki.sub("".join(pending)))
    return "".join(parts)


def read_markdown(data: bytes, mime: str, name: str, max_chars: int) -> Document:
    """A Markdown note: its front matter into the metadata and title, its text with headings (the heading path),
    lists, tables as rows naming their columns, code kept."""
    meta, body = front_matter(decode(data))
    tokens = _markdown().parse(body)
    layout = Layout(max_chars)
    wiki = _Wiki()
    lists: list[list[Any]] = []  # [ordered, next number] per open list
    table: list[list[str]] | None = None
    first_h1: str | None = None
    for i, tok in enumerate(tokens):
        t = tok.type
        if t in ("bullet_list_open", "ordered_list_open"):
            lists.append([t == "ordered_list_open", int(tok.attrs.get("start", 1) or 1)])
        elif t in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
        elif t == "heading_open":
            text = _inline(tokens[i + 1], wiki)
            layout.heading(int(tok.tag[1]), text)
            if tok.tag == "h1" and first_h1 is None:
                first_h1 = one_line(text) or None
        elif t == "table_open":
            table = []
        elif t == "tr_open" and table is not None:
            table.append([])
        elif t == "inline" and table is not None and tokens[i - 1].type in ("th_open", "td_open"):
            table[-1].append(_inline(tok, wiki))
        elif t == "table_close" and table is not None:
            layout.table(table)
            table = None
        elif t == "inline" and tokens[i - 1].type == "paragraph_open":
            text = _inline(tok, wiki)
            if lists and tokens[i - 2].type == "list_item_open":
                ordered = lists[-1]
                marker = f"{ordered[1]}." if ordered[0] else None
                ordered[1] += 1
                layout.item(text, len(lists) - 1, marker)
            else:
                layout.block(text)
        elif t in ("fence", "code_block"):
            layout.block(tok.content)
        elif t == "html_block":
            layout.block(_html_words(tok.content))
    if wiki.links:
        meta["links"] = wiki.links
    title = meta.pop("title", None) or first_h1 or layout.first_heading
    return layout.document("markdown", title, {"format": "markdown", **meta})


def _html_words(fragment: str) -> str:
    try:
        return lxml.html.fragment_fromstring(fragment, create_parent="div").text_content()
    except (etree.ParserError, ValueError):
        return ""


# -------------------------------------------------------------------------------------------------------------- HTML

def parse_html(data: bytes | str) -> Any:
    """An HTML document's root (lxml's HTML parser: no entity declarations honoured, nothing fetched)."""
    text = data if isinstance(data, str) else decode(data, _declared_charset(data))
    text = _XML_DECL.sub("", text, count=1).replace("\x00", "")
    if not text.strip():
        raise extraction_failed("The HTML file is empty.")
    parser = lxml.html.HTMLParser(no_network=True, remove_comments=True, remove_pis=True, huge_tree=False)
    try:
        return lxml.html.document_fromstring(text, parser=parser)
    except (etree.ParserError, ValueError) as exc:
        raise extraction_failed(f"The HTML could not be read: {exc}") from None


def _declared_charset(data: bytes) -> str | None:
    found = _META_CHARSET.search(data[:4096])
    return found.group(1).decode("ascii").lower() if found else None


def walk_html(node: Any, layout: Layout, *, shift: int = 0, skip_heading: str | None = None) -> None:
    """Write an HTML element's content into `layout` in reading order: headings (level + `shift`; the first one
    equal to `skip_heading` left out, it is the chapter's title already), lists, tables, paragraphs."""
    _Walker(layout, shift, skip_heading).walk(node)


class _Walker:
    def __init__(self, layout: Layout, shift: int, skip_heading: str | None) -> None:
        self.layout, self.shift, self.skip = layout, shift, skip_heading
        self.buffer: list[str] = []

    def flush(self) -> None:
        if self.buffer:
            self.layout.block("".join(self.buffer))
            self.buffer = []

    def walk(self, node: Any) -> None:
        self._element(node)
        self.flush()

    def _element(self, el: Any) -> None:
        tag = el.tag.lower() if isinstance(el.tag, str) else ""
        if tag in _SKIP or not isinstance(el.tag, str):
            return
        if tag in _HEADINGS:
            self.flush()
            words = one_line(el.text_content())
            if self.skip is not None and words == self.skip:
                self.skip = None
            else:
                self.layout.heading(_HEADINGS[tag] + self.shift, words)
            return
        if tag in ("ul", "ol"):
            self.flush()
            self._list(el, 0)
            return
        if tag == "table":
            self.flush()
            self.layout.table([[c.text_content() for c in tr if isinstance(c.tag, str) and c.tag.lower() in
                                ("td", "th")] for tr in el.iter("tr")])
            return
        if tag == "pre":
            self.flush()
            self.layout.block(el.text_content())
            return
        block = tag in _BLOCKS
        if block:
            self.flush()
        if tag == "br":
            self.buffer.append("\n")
        if el.text:
            self.buffer.append(el.text)
        for child in el:
            self._element(child)
            if child.tail:
                self.buffer.append(child.tail)
        if block:
            self.flush()

    def _list(self, el: Any, depth: int) -> None:
        ordered = el.tag.lower() == "ol"
        n = 0
        for li in el:
            if not isinstance(li.tag, str) or li.tag.lower() != "li":
                continue
            n += 1
            nested = [c for c in li if isinstance(c.tag, str) and c.tag.lower() in ("ul", "ol")]
            words = "".join([li.text or ""] + [_words(c) + (c.tail or "") for c in li if c not in nested])
            self.layout.item(words, depth, f"{n}." if ordered and depth == 0 else None)
            for sub in nested:
                self._list(sub, depth + 1)


def _words(el: Any) -> str:
    if not isinstance(el.tag, str) or el.tag.lower() in _SKIP:
        return ""
    return str(el.text_content())


def read_html(data: bytes, mime: str, name: str, max_chars: int) -> Document:
    """A saved web page: its `<main>` or `<article>` (else its body) as text, its title, description, author and
    the address it was saved from (its canonical link)."""
    root = parse_html(data)
    main = root.xpath("//main") or root.xpath("//article")
    layout = Layout(max_chars)
    walk_html(main[0] if len(main) == 1 else root.find("body") if root.find("body") is not None else root, layout)
    meta: dict[str, Any] = {"format": "html"}
    for name, key in (("description", "description"), ("author", "author")):
        value = root.xpath(f"string(//meta[@name='{name}']/@content)")
        if value.strip():
            meta[key] = one_line(value)[:1000]
    source = root.xpath("string(//link[@rel='canonical']/@href)") or root.xpath(
        "string(//meta[@property='og:url']/@content)")
    if source.strip().lower().startswith(("http://", "https://")):
        meta["source_url"] = source.strip()[:4096]
    title = one_line(root.xpath("string(//title)")) or layout.first_heading
    return layout.document("html", title, meta)
