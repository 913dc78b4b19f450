"""A client generated from the served openapi.json by openapi-python-client, with no configuration file (what an
integrator would do: 0 warnings, every operation generated), runs every operation of the contract against the live
server, from the host's base URL as the client's docs show."""

from __future__ import annotations

import importlib
import io
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import httpx
import pytest
from inflection import underscore

from lev.core.contract import operations
from tests import fixtures_media as fm
from tests.fixtures_feeds import FeedEntry, FeedSite, WebhookReceiver
from tests.stack import new_user

PACKAGE = "lev_rest_api_client"  # from the document's title, "Lev REST API"
GENERATOR = Path(sys.executable).with_name("openapi-python-client")


@pytest.fixture(scope="module")
def client_pkg(server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:  # type: ignore[no-untyped-def]
    out = tmp_path_factory.mktemp("genclient")
    run = subprocess.run(
        [str(GENERATOR), "generate", "--url", f"{server.url}/api/v1/openapi.json",
         "--output-path", str(out / "lev-client")],
        capture_output=True, text=True, timeout=300,
        # its default post-hooks format the code with ruff (a dev tool beside it): found on PATH, as for a user
        env={**os.environ, "PATH": f"{GENERATOR.parent}:{os.environ.get('PATH', '')}"},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "warning" not in (run.stdout + run.stderr).lower(), run.stdout + run.stderr
    generated = {p.stem for p in (out / "lev-client" / PACKAGE / "api").rglob("*.py") if p.stem != "__init__"}
    assert generated == {underscore(op) for op in operations()}, "operations missing from the generated client"
    sys.path.insert(0, str(out / "lev-client"))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(out / "lev-client"))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]


def test_generated_client_runs_every_operation(client_pkg: Any, server, user, admin,  # type: ignore[no-untyped-def]
                                               tmp_path: Path) -> None:
    api = lambda tag, op: importlib.import_module(f"{PACKAGE}.api.{tag}.{op}")  # noqa: E731
    models = importlib.import_module(f"{PACKAGE}.models")
    types = importlib.import_module(f"{PACKAGE}.types")
    called: set[str] = set()

    def call(tag: str, op: str, status: int, **kwargs: Any) -> Any:
        resp = api(tag, op).sync_detailed(client=kwargs.pop("client", client), **kwargs)
        assert resp.status_code == status, (op, resp.status_code, resp.content[:500])
        called.add(op)
        return resp.parsed

    # the host's base URL, exactly as the generated README shows it
    client = client_pkg.AuthenticatedClient(base_url=server.url, token=user.token(write=True), timeout=120)
    anonymous = client_pkg.Client(base_url=server.url, timeout=60)

    spec = call("meta", "get_open_api_document", 200, client=anonymous)
    assert call("token", "introspect_token", 200).whole_library is True
    assert spec.additional_properties["openapi"].startswith("3.1")
    folder = call("folders", "create_folder", 201, body=models.FolderCreate(name="Generated"))
    assert isinstance(folder.id, UUID)
    assert [f.name for f in call("folders", "list_folders", 200).folders] == ["Generated"]

    ingested = call("ingest", "ingest", 200,
                    body=models.IngestText(kind=models.IngestTextKind.TEXT, text="Generated clients read zebras."))
    item_id = ingested.user_item_id
    assert call("items", "get_item", 200, id=item_id).text == "Generated clients read zebras."
    assert call("items", "similar_items", 200, id=item_id).results == []
    added = call("items", "add_item_to_folders", 200, id=item_id, body=models.MembershipAdd(folder_ids=[folder.id]))
    assert added.folder_ids == [folder.id]
    assert call("items", "list_items", 200, folder_id=folder.id).total == 1
    hits = call("search", "search_knowledge_base", 200, q="zebras")
    assert hits.results and hits.results[0].item_id == item_id and hits.results[0].score > 0
    top = hits.results[0]  # issue 39: kind, saved date and location on every hit; the filters
    assert top.kind.value == "text" and top.location.char_start == 0 and top.location.heading is None
    assert top.location.char_end == len("Generated clients read zebras.") and top.saved_at.year >= 2026
    narrowed = call("search", "search_knowledge_base", 200, q="zebras", item_id=item_id, after="2026-01-01",
                    kind=[models.SearchKnowledgeBaseKindItem.TEXT, models.SearchKnowledgeBaseKindItem.PDF])
    assert [h.item_id for h in narrowed.results] == [item_id]
    assert call("search", "search_knowledge_base", 200, q="zebras", site="example.org").results == []
    # tags (issue 50), the archived copy a note has not, the files kept by their path (issue 48)
    call("tags", "replace_item_tags", 200, id=item_id, body=models.ItemTagsBody(tags=["gen-one"]))
    call("tags", "add_item_tags", 200, id=item_id, body=models.ItemTagsBody(tags=["gen-two"]))
    assert sorted((t.name, t.count) for t in call("tags", "list_tags", 200).tags) == [("gen-one", 1), ("gen-two", 1)]
    call("tags", "rename_tag", 200, name="gen-two", body=models.TagRename(name="gen-three"))
    call("tags", "remove_item_tag", 200, id=item_id, name="gen-one")
    assert [t.name for t in call("tags", "list_tags", 200).tags] == ["gen-three"]
    call("tags", "delete_tag", 200, name="gen-three")
    assert call("tags", "list_tags", 200).tags == []
    call("items", "get_item_archive", 404, id=item_id)
    call("uploads", "list_source_files", 200)
    page = call("items", "get_item", 200, id=item_id, offset=10, max_chars=7)
    assert (page.text, page.text_offset, page.next_offset, page.text_total_chars) == ("clients", 10, 17, 30)
    assert call("items", "remove_item_from_folder", 200, id=item_id, folder_id=folder.id).folder_ids == []
    page_url = "https://example.com/generated/page"
    captured = call("ingest", "ingest", 200, body=models.IngestPage(
        kind=models.IngestPageKind.PAGE, url=page_url,
        html="<html><body><article><p>Generated clients capture pages of okapis.</p></article></body></html>"))
    assert captured.status.value == "ready"
    assert [i.id for i in call("items", "list_items", 200, url_query=page_url).items] == [captured.user_item_id]
    noted = call("ingest", "ingest", 200, body=models.IngestText(kind=models.IngestTextKind.TEXT, text="Okapis.",
                                                                  source_url=page_url))
    assert call("items", "get_item", 200, id=noted.user_item_id).metadata["source_url"] == page_url

    pdf = fm.make_text_pdf(tmp_path / "gen.pdf", ["A generated client uploaded this page."])
    data = fm.file_bytes(pdf)
    signed = call("uploads", "create_upload_url", 200, body=models.UploadRequest(
        mime=models.UploadMime.APPLICATIONPDF, size=len(data), filename="gen.pdf"))
    query = dict(httpx.URL(signed.signed_url).params)
    stored = call("uploads", "put_upload_object", 200, client=anonymous, path=signed.path,
                  body=types.File(payload=io.BytesIO(data)), **query)
    assert stored.size == len(data)
    doc = call("uploads", "finalize_document_upload", 200, body=models.FinalizeDocumentRequest(
        path=signed.path, mime=models.FinalizeDocumentRequestMime.APPLICATIONPDF, size=len(data),
        filename="gen.pdf"))
    assert doc.status.value == "ready"
    stored_file = call("items", "get_item_media", 200, id=doc.user_item_id)
    assert stored_file.payload.read() == data

    wav = fm.file_bytes(fm.make_wav(tmp_path / "gen.wav", seconds=1.0))
    signed = call("uploads", "create_upload_url", 200, body=models.UploadRequest(
        mime=models.UploadMime.AUDIOWAV, size=len(wav), filename="gen.wav"))
    call("uploads", "put_upload_object", 200, client=anonymous, path=signed.path,
         body=types.File(payload=io.BytesIO(wav)), **dict(httpx.URL(signed.signed_url).params))
    media = call("uploads", "finalize_media_upload", 200, body=models.FinalizeMediaRequest(
        path=signed.path, mime=models.FinalizeMediaRequestMime.AUDIOWAV, size=len(wav), filename="gen.wav"))
    assert media.status.value in ("transcribing", "processing")

    gone = call("items", "bulk_delete_items", 200, body=models.BulkDelete(ids=[doc.user_item_id]))
    assert gone.deleted == [doc.user_item_id]
    assert call("items", "delete_item", 200, id=item_id).deleted is True
    assert call("folders", "delete_folder", 200, id=folder.id).deleted is True
    time.sleep(1.5)  # the activity writer flushes in the background
    assert call("activity", "list_activity", 200).total > 0

    # updates
    folder2 = call("folders", "create_folder", 201, body=models.FolderCreate(name="Before"))
    assert call("folders", "rename_folder", 200, id=folder2.id, body=models.FolderUpdate(name="After")).name == "After"
    kept = models.IngestText(kind=models.IngestTextKind.TEXT, text="kept")
    item2 = call("ingest", "ingest", 200, body=kept).user_item_id
    assert call("items", "update_item", 200, id=item2, body=models.ItemUpdate(title="Renamed")).title == "Renamed"

    # highlights: one of the kept item, its note changed, the library's list, the item as Markdown
    marked = call("highlights", "create_highlight", 201, id=item2,
                  body=models.HighlightCreate(text="kept", note="A note."))
    assert (marked.char_start, marked.char_end, marked.text, marked.note) == (0, 4, "kept", "A note.")
    assert [h.id for h in call("highlights", "list_item_highlights", 200, id=item2).highlights] == [marked.id]
    changed = call("highlights", "update_highlight", 200, id=marked.id, body=models.HighlightUpdate(note="Changed."))
    assert changed.note == "Changed."
    assert [h.id for h in call("highlights", "list_highlights", 200).highlights] == [marked.id]
    assert "> kept\n\nChanged." in call("highlights", "get_item_markdown", 200, id=item2)
    call("highlights", "delete_highlight", 204, id=marked.id)

    # imports and export
    started = call("imports", "create_import", 202, body=models.CreateImportBody(
        file=types.File(payload=io.BytesIO(b"title,url\n"), file_name="empty.csv", mime_type="text/csv")))
    assert (started.format_.value, started.total, started.status.value) == ("csv", 0, "done")
    assert call("imports", "get_import", 200, id=started.id).id == started.id
    assert [i.id for i in call("imports", "list_imports", 200).imports] == [started.id]
    exported = call("imports", "export_library", 200).payload.read().decode().splitlines()
    assert '"type":"lev_export"' in exported[0] and '"type":"end"' in exported[-1]

    # feeds and webhooks, against a loopback feed site and a loopback receiver
    site, receiver = FeedSite(), WebhookReceiver()
    try:
        feed_url = site.add("gen", "rss", [FeedEntry(1)], "Generated feed")
        feed = call("feeds", "create_feed", 201, body=models.FeedCreate(url=feed_url))
        assert [f.id for f in call("feeds", "list_feeds", 200).feeds] == [feed.id]
        assert call("feeds", "get_feed", 200, id=feed.id).url == feed_url
        paused = call("feeds", "update_feed", 200, id=feed.id, body=models.FeedUpdate(paused=False, title="Gen"))
        assert paused.title == "Gen"
        call("feeds", "refresh_feed", 202, id=feed.id)
        opml = call("feeds", "export_opml", 200)
        assert feed_url in opml
        counts = call("feeds", "import_opml", 200, body=models.ImportOpmlBody(
            file=types.File(payload=io.BytesIO(opml.encode()), file_name="feeds.opml", mime_type="text/x-opml")))
        assert counts.already_followed == 1
        assert call("feeds", "delete_feed", 200, id=feed.id)

        hook = call("webhooks", "create_webhook", 201, body=models.WebhookCreate(
            url=receiver.url, events=[models.WebhookEventType.ITEM_CREATED]))
        assert hook.secret.startswith("whsec_")
        assert [w.id for w in call("webhooks", "list_webhooks", 200).webhooks] == [hook.id]
        assert call("webhooks", "get_webhook", 200, id=hook.id).url == receiver.url
        call("webhooks", "update_webhook", 200, id=hook.id, body=models.WebhookUpdate(description="gen"))
        assert call("webhooks", "rotate_webhook_secret", 200, id=hook.id).secret.startswith("whsec_")
        call("webhooks", "test_webhook", 202, id=hook.id)
        receiver.wait_for(lambda ds: len(ds) >= 1)
        deliveries: list[Any] = []
        for _ in range(120):
            deliveries = call("webhooks", "list_webhook_deliveries", 200, id=hook.id).deliveries
            if deliveries and deliveries[0].status_code == 200:
                break
            time.sleep(0.5)
        call("webhooks", "resend_webhook_delivery", 202, id=hook.id, delivery_id=deliveries[0].id)
        assert call("webhooks", "delete_webhook", 200, id=hook.id)
    finally:
        site.close()
        receiver.close()

    # the account API: a browser-style session (cookie kept by the client, CSRF token sent as a header)
    email = f"gen{uuid4().hex[:8]}@example.com"
    browser = client_pkg.Client(base_url=server.url, timeout=60)
    signed = call("account", "sign_up", 201, client=browser,
                  body=models.SignUp(email=email, password="generated client pw 1"))
    admin.sql("UPDATE users SET tier = 'pro' WHERE id = :u", u=str(signed.user_id))
    session = client_pkg.AuthenticatedClient(base_url=server.url, token=signed.csrf_token, prefix="",
                                             auth_header_name="X-CSRF-Token", timeout=60,
                                             cookies=dict(browser.get_httpx_client().cookies))
    assert call("account", "get_account", 200, client=session).email == email
    minted = call("account", "create_token", 201, client=session, body=models.TokenCreate(name="gen"))
    assert [t.name for t in call("account", "list_tokens", 200, client=session).tokens] == ["gen"]
    assert call("account", "revoke_token", 200, client=session, id=minted.id)
    call("account", "list_account_activity", 200, client=session)
    call("account", "clear_account_activity", 200, client=session)
    call("account", "change_password", 200, client=session, body=models.PasswordChange(
        current_password="generated client pw 1", new_password="generated client pw 2"))
    again = call("account", "sign_in", 200, client=browser,
                 body=models.SignIn(email=email, password="generated client pw 2"))
    session = client_pkg.AuthenticatedClient(base_url=server.url, token=again.csrf_token, prefix="",
                                             auth_header_name="X-CSRF-Token", timeout=60,
                                             cookies=dict(browser.get_httpx_client().cookies))
    # an unverified address: this Lev sends no mail (400 mail_unavailable), and a made-up code verifies nothing
    call("account", "send_email_verification", 400, client=session)
    call("account", "confirm_email", 404, client=session, code="not-a-code-" + "x" * 32)
    call("account", "sign_out", 200, client=session)

    # sharing: an invitation declined, another accepted, a role changed, the member removed; the public page
    guest = new_user(admin)
    guest_client = client_pkg.AuthenticatedClient(base_url=server.url, token=guest.token(write=True), timeout=60)
    shared = call("folders", "create_folder", 201, body=models.FolderCreate(name="Shared by a client"))
    invite = models.InvitationCreate(email=guest.email, role=models.InvitationCreateRole.VIEWER)
    first = call("sharing", "create_invitation", 201, id=shared.id, body=invite)
    assert [i.id for i in call("sharing", "list_invitations", 200, client=guest_client).invitations] == [first.id]
    call("sharing", "decline_invitation", 204, client=guest_client, id=first.id)
    withdrawn = call("sharing", "create_invitation", 201, id=shared.id, body=invite)
    call("sharing", "delete_invitation", 204, id=shared.id, invitation_id=withdrawn.id)
    second = call("sharing", "create_invitation", 201, id=shared.id, body=invite)
    assert call("sharing", "accept_invitation", 200, client=guest_client, id=second.id).folder_id == shared.id
    members = call("sharing", "list_members", 200, id=shared.id).members
    assert [m.role.value for m in members] == ["owner", "viewer"]
    promoted = call("sharing", "update_member", 200, id=shared.id, user_id=guest.id,
                    body=models.MemberUpdate(role=models.MemberUpdateRole.EDITOR))
    assert promoted.role.value == "editor"
    call("sharing", "delete_member", 204, id=shared.id, user_id=guest.id)
    third = call("sharing", "create_invitation", 201, id=shared.id, body=invite)
    relinked = call("sharing", "create_invitation_link", 201, id=shared.id, invitation_id=third.id)
    code = relinked.accept_url.rsplit("/", 1)[-1]
    assert code not in third.accept_url  # the new link replaces the first
    assert call("sharing", "get_invitation_link", 200, client=guest_client, code=code).id == third.id
    call("sharing", "answer_invitation_link", 200, client=guest_client, code=code,
         body=models.InvitationAnswer(accept=False))
    call("sharing", "get_invitation_link", 404, client=guest_client, code=code)
    page = call("sharing", "publish_folder", 200, id=shared.id)
    assert call("sharing", "get_publication", 200, id=shared.id).url == page.url
    call("sharing", "unpublish_folder", 204, id=shared.id)

    # errors come back as the contract's Error model
    missing = api("items", "get_item").sync_detailed(client=client, id=UUID(int=1))
    assert missing.status_code == 404 and missing.parsed.error.value == "not_found"

    missing_ops = sorted(op for op in operations() if underscore(op) not in called)
    assert not missing_ops, f"operations not run with the generated client: {missing_ops}"


def test_the_generated_client_knows_the_upload_cap(client_pkg: Any) -> None:
    """openapi-python-client keeps the schema's cap in the model it generates: the upload size's maximum (52428800)
    is in the UploadRequest model the integrator's editor shows."""
    import inspect

    models = importlib.import_module(f"{PACKAGE}.models")
    source = inspect.getsource(models.UploadRequest)
    assert "52428800" in source and "size" in source, source[:1500]
