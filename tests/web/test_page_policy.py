"""Every page in real Chromium (Debian's chromium through Playwright), signed out and signed in: it carries the
security headers (a Content-Security-Policy with frame-ancestors 'none', nosniff, a referrer policy), works under
that policy (no violation reported, the JavaScript-driven forms still act), and axe-core (pinned, from the npm
registry into .cache/) finds no WCAG 2.1 A/AA violation. And a sign-in never leads off Lev's origin, whatever
`next` says, in the browser's own reading of the URL."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx

from lev.library.reads import create_folder
from tests.npm_cache import npm_package
from tests.oauth.test_oauth import CALLBACK, _pkce
from tests.stack import Admin, LiveServer
from tests.web.test_web import PASSWORD, browser, page, pytestmark, sign_up  # noqa: F401 (fixtures)

AXE = "axe-core@4.14.1"
WCAG_21_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


def _axe_source() -> str:
    return (npm_package(AXE, "axe-core-4.14.1") / "axe.min.js").read_text()


class Watch:
    """A page's Content-Security-Policy violations as Chromium reports them on its console."""

    def __init__(self, tab: Any) -> None:
        self.violations: list[str] = []
        tab.on("console", self._console)

    def _console(self, msg: Any) -> None:
        if "Content Security Policy" in msg.text or "Refused to" in msg.text:
            self.violations.append(msg.text)


def _check(tab: Any, path: str, axe: str, *, status: int = 200) -> None:
    """Open `path`: the headers, no policy violation, no axe violation."""
    watch = Watch(tab)
    response = tab.goto(path)
    assert response is not None and response.status == status, (path, response and response.status)
    tab.wait_for_load_state("networkidle")
    headers = response.all_headers()
    csp = headers.get("content-security-policy", "")
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp, (path, csp)
    assert headers.get("x-content-type-options") == "nosniff", path
    assert headers.get("referrer-policy") == "same-origin", path
    assert tab.evaluate("typeof window.htmx") == "object", path  # the pinned scripts ran under the policy
    tab.evaluate(axe)  # DevTools evaluation: not a page script, so the policy does not apply to it
    result = tab.evaluate("""async (tags) => {
        const r = await axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']});
        return r.violations.map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(' '))}));
    }""", WCAG_21_AA)
    assert result == [], (path, result)
    assert watch.violations == [], (path, watch.violations)


def test_every_page_has_the_policy_works_under_it_and_passes_axe(page: Any, admin: Admin,  # noqa: F811
                                                                 server: LiveServer) -> None:
    axe = _axe_source()
    page.set_viewport_size({"width": 1024, "height": 800})
    for path in ("/login", "/signup", "/", "/login?next=/activity"):
        _check(page, path, axe)
    cid = httpx.post(f"{server.url}/oauth/register", json={"redirect_uris": [CALLBACK], "client_name": "Axe app",
                                                           "token_endpoint_auth_method": "none"}).json()["client_id"]
    _check(page, "/oauth/authorize?client_id=nobody", axe, status=400)  # the authorization error page

    email = sign_up(page)
    uid = admin.sql("SELECT id FROM users WHERE email = :e", e=email)[0][0]
    admin.sql("UPDATE users SET tier = 'pro' WHERE id = :u", u=uid)
    folder = admin.run(lambda s: create_folder(s, uid, "Reading"))["id"]
    csrf = page.locator('meta[name="csrf-token"]').get_attribute("content")
    item = page.request.post("/api/v1/ingest", headers={"X-CSRF-Token": csrf},
                             data={"kind": "text", "text": "Notes on accessible tables and keyboards.",
                                   "title": "Accessible tables"}).json()
    minted = page.request.post("/api/account/tokens", headers={"X-CSRF-Token": csrf},
                               data={"name": "an agent with a rather long name for the table"})
    assert minted.status == 201
    for n in range(30):  # enough activity for a wide, scrolling table
        page.request.get(f"/api/v1/search?q=keyboard+{n}")
    authorize = "/oauth/authorize?" + urlencode({
        "response_type": "code", "client_id": cid, "redirect_uri": CALLBACK, "code_challenge": _pkce()[1],
        "code_challenge_method": "S256", "scope": "lev:read lev:write", "resource": f"{server.url}/api/mcp"})
    for path, status in (("/", 200), (f"/folders/{folder}", 200), (f"/items/{item['user_item_id']}", 200),
                         ("/import", 200), ("/settings/integrations", 200), ("/activity", 200),
                         ("/settings/account", 200), (authorize, 200), ("/?q=keyboard", 200),
                         (f"/items/{uuid.uuid4()}", 404), ("/oauth/authorize?client_id=nobody", 400)):
        _check(page, path, axe, status=status)
    # the consent form posts under the policy and its answer reaches the client (form-action names it)
    seen: list[str] = []
    page.route(f"{CALLBACK}**", lambda route: (seen.append(route.request.url),
                                               route.fulfill(status=200, body="back in the app")))
    page.goto(authorize)
    page.get_by_role("button", name="Allow").click()
    page.get_by_text("back in the app").wait_for()
    assert "code=" in seen[0]
    # a JavaScript form still acts under the policy: a folder is created and shown
    page.goto("/")
    page.get_by_label("New folder").fill("Made under the policy")
    page.get_by_role("button", name="Create", exact=True).click()
    page.wait_for_url("**/folders/*")
    assert "Made under the policy" in page.inner_text("h1")


def test_the_activity_table_fits_and_the_keyboard_reaches_it(page: Any, server: LiveServer) -> None:  # noqa: F811
    """Issue 51: the table no longer scrolls sideways (it overflowed its box at 1280 px); at 600 and 390 px its rows
    stack, and its region is still reached by Tab (were it ever to scroll, arrows would move it)."""
    sign_up(page)
    for width in (600, 390):
        page.set_viewport_size({"width": width, "height": 800})
        for _ in range(40):  # the activity log is written in batches every 0.5 s
            page.goto("/activity")
            if page.locator("table.activity").count():
                break
            page.wait_for_timeout(250)
        region = page.get_by_role("region", name="Activity entries")
        assert region.evaluate("el => el.scrollWidth <= el.clientWidth + 1"), width
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('scroll')"):
            break
    else:
        raise AssertionError("Tab never reached the activity table's region")


class Elsewhere:
    """Answers any request to another origin itself (nothing leaves the machine) and notes its URL."""

    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    def __call__(self, route: Any) -> None:
        self.seen.append(route.request.url)
        route.fulfill(status=200, body="left Lev")


def test_sign_in_never_leads_off_lev_s_origin_in_the_browser(browser: Any, server: LiveServer) -> None:  # noqa: F811
    """The browser reads `/\\host` as `//host` and drops tabs: such a `next` must bring the person to Lev's home.
    Any request to another origin is caught here (and answered by the test), so nothing leaves the machine."""
    email = f"n{uuid.uuid4().hex[:8]}@example.com"
    assert httpx.post(f"{server.url}/api/account/signup",
                      json={"email": email, "password": PASSWORD}).status_code == 201
    elsewhere = f"127.0.0.2:{urlsplit(server.url).port}"  # another origin, still loopback
    for raw in (f"/%5C{elsewhere}/landed", f"/%09/{elsewhere}/landed", f"/%5C%5C{elsewhere}/landed"):
        ctx = browser.new_context(base_url=server.url)
        try:
            left: list[str] = []
            ctx.route(lambda url: not url.startswith(server.url), Elsewhere(left))
            p = ctx.new_page()
            p.goto(f"/login?next={raw}")
            p.get_by_label("Email").fill(email)
            p.get_by_label("Password").fill(PASSWORD)
            p.get_by_role("button", name="Sign in").click()
            p.wait_for_url(f"{server.url}/")
            p.wait_for_load_state("networkidle")
            assert left == [] and p.url == f"{server.url}/", (raw, left, p.url)
        finally:
            ctx.close()
