"""E-mails (.eml, RFC 5322 with MIME) read into a `Layout` by the standard library's parser: the subject (the title
and every passage's heading), sender, recipients and date, then the body (its plain-text part, else its HTML part
through the HTML walker). Attachments come back as they are; `lev.ingest.formats` keeps those of a type Lev reads,
each an item of its own linked from the message."""

from __future__ import annotations

import email
import email.policy
from email.message import EmailMessage
from email.utils import parsedate_to_datetime
from typing import Any

from lev.core.errors import ApiError, extraction_failed
from lev.ingest.layout import Attachment, Document, Layout, one_line
from lev.ingest.markup import parse_html, walk_html

MAX_ATTACHMENTS = 50
MAX_PARTS = 1000


def read(data: bytes, mime: str, name: str, max_chars: int) -> Document:
    try:
        msg = email.message_from_bytes(data, policy=email.policy.default)
    except (ValueError, TypeError, IndexError) as exc:
        raise extraction_failed(f"The e-mail could not be read: {exc}") from None
    if not isinstance(msg, EmailMessage) or not (msg.keys() or msg.get_payload()):
        raise extraction_failed("The e-mail has no headers or body.")
    subject = _header(msg, "subject")
    layout = Layout(max_chars)
    layout.section(subject or "")
    meta: dict[str, Any] = {"format": "eml"}
    head = []
    for key, label in (("from", "From"), ("to", "To"), ("cc", "Cc"), ("date", "Date")):
        value = _header(msg, key)
        if value:
            head.append(f"{label}: {value}")
            meta[key if key != "date" else "sent"] = value[:1000]
    if subject:
        meta["subject"] = subject[:1000]
    when = _date(msg)
    if when:
        meta["date"] = when
    if subject:
        layout.block(f"Subject: {subject}")
    for line in head:
        layout.line(line)
    _body(layout, msg)
    attachments = _attachments(msg)
    if attachments:
        meta["attachment_names"] = [a.filename for a in attachments][:MAX_ATTACHMENTS]
    return layout.document("email", subject, meta, tuple(attachments))


def _header(msg: EmailMessage, key: str) -> str:
    try:
        value = msg.get(key)
    except (ValueError, TypeError, IndexError):  # a malformed header: read as nothing
        return ""
    return one_line(str(value)) if value is not None else ""


def _date(msg: EmailMessage) -> str | None:
    raw = msg.get("date")
    if raw is None:
        return None
    try:
        return parsedate_to_datetime(str(raw)).isoformat()
    except (TypeError, ValueError, IndexError):
        return None


def _content(part: Any) -> str:
    try:
        value = part.get_content()
    except (LookupError, ValueError, TypeError, AssertionError, KeyError):  # an unknown charset or broken encoding
        payload = part.get_payload(decode=True) or b""
        value = payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else str(payload)
    return value if isinstance(value, str) else ""


def _body(layout: Layout, msg: EmailMessage) -> None:
    try:
        part = msg.get_body(preferencelist=("plain", "html"))
    except (ValueError, TypeError, IndexError, KeyError):
        part = None
    if part is None:
        return
    text = _content(part)
    if part.get_content_subtype() == "html":
        try:
            walk_html(parse_html(text), layout)
        except ApiError:  # an empty HTML part
            pass
        return
    for paragraph in text.replace("\r\n", "\n").split("\n\n"):
        layout.block(paragraph)


def _attachments(msg: EmailMessage) -> list[Attachment]:
    found: list[Attachment] = []
    try:
        parts = list(msg.iter_attachments())[:MAX_PARTS]
    except (ValueError, TypeError, IndexError, KeyError):
        return found
    for part in parts:
        if len(found) >= MAX_ATTACHMENTS:
            break
        filename = one_line(part.get_filename() or "")[:255]
        if not filename:
            continue
        try:
            data = part.get_payload(decode=True)
        except (ValueError, TypeError, IndexError, KeyError):
            continue
        if isinstance(data, bytes) and data:
            found.append(Attachment(filename, part.get_content_type(), data))
    return found
