"""Signing in to a console over HTTP the way the browser does: the token URL, whose answer sets the
session cookie; gives the Cookie header and the page's CSRF secret."""

from __future__ import annotations

import re
import urllib.error
import urllib.request


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def sign_in_cookie(url: str) -> tuple[str, str]:
    """(the Set-Cookie header, the Cookie header) of a sign-in at the printed `url` (`.../?token=...`)."""
    try:
        urllib.request.build_opener(_NoRedirect).open(url, timeout=10)
    except urllib.error.HTTPError as exc:
        if exc.code != 303:
            raise AssertionError(f"sign-in answered {exc.code}: {exc.read()!r}") from exc
        set_cookie = str(exc.headers["set-cookie"])
        return set_cookie, set_cookie.split(";", 1)[0]
    raise AssertionError("the sign-in URL did not redirect")


def sign_in(url: str) -> dict[str, str]:
    """Headers of a signed-in client: its Cookie and, from the page, its X-CSRF-Token."""
    cookie = sign_in_cookie(url)[1]
    base = url.split("/?", 1)[0]
    with urllib.request.urlopen(urllib.request.Request(base + "/", headers={"Cookie": cookie}), timeout=10) as page:
        csrf = re.search(r'name="csrf-token" content="([^"]+)"', page.read().decode())
    assert csrf, "the page carries no CSRF secret"
    return {"Cookie": cookie, "X-CSRF-Token": csrf.group(1), "Origin": base}
