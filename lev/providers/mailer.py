"""Plain-text mail through the operator's SMTP server (`LEV_SMTP_URL`: `smtp://` with STARTTLS when offered, or
`smtps://`), the `Mailer` adapter; the standard library's client, run on a thread, bounded in time."""

from __future__ import annotations

import asyncio
import smtplib
import ssl
from email.message import EmailMessage
from email.utils import make_msgid
from urllib.parse import unquote, urlsplit

from lev.core.settings import Settings
from lev.plumbing.ports import Mailer, MailError

TIMEOUT_SEC = 15.0


class SmtpMailer:
    """Sends each message on a connection of its own (Lev's mail is rare: invitations, verifications)."""

    def __init__(self, url: str, sender: str, timeout: float = TIMEOUT_SEC) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
            raise ValueError("LEV_SMTP_URL must be smtp://[user:password@]host[:port] or smtps://...")
        self.implicit_tls = parts.scheme == "smtps"
        self.host = parts.hostname
        self.port = parts.port or (465 if self.implicit_tls else 587)
        self.user = unquote(parts.username) if parts.username else None
        self.password = unquote(parts.password) if parts.password else None
        self.sender = sender
        self.timeout = timeout

    def _send(self, message: EmailMessage) -> None:
        context = ssl.create_default_context()
        try:
            if self.implicit_tls:
                client: smtplib.SMTP = smtplib.SMTP_SSL(self.host, self.port, timeout=self.timeout, context=context)
            else:
                client = smtplib.SMTP(self.host, self.port, timeout=self.timeout)
            with client:
                client.ehlo()
                if not self.implicit_tls and client.has_extn("starttls"):
                    client.starttls(context=context)
                    client.ehlo()
                if self.user:
                    client.login(self.user, self.password or "")
                client.send_message(message)
        except (OSError, smtplib.SMTPException) as exc:
            raise MailError(f"the mail server {self.host}:{self.port} did not take the message: "
                            f"{type(exc).__name__}") from None

    async def send(self, to: str, subject: str, body: str) -> None:
        message = EmailMessage()
        message["From"], message["To"], message["Subject"] = self.sender, to, subject
        message["Message-ID"] = make_msgid(domain="lev.invalid")
        message.set_content(body)
        await asyncio.to_thread(self._send, message)


def mailer_from(settings: Settings) -> Mailer | None:
    """The configured mailer, or None when `LEV_SMTP_URL` is unset."""
    return SmtpMailer(settings.smtp_url, settings.smtp_from) if settings.smtp_url else None
