"""The web console (`harness web`): runs, trajectories, patches, evaluation reports and approvals.

`app` is the ASGI app and its guard (sign-in, Host/Origin/CSRF checks, security headers), `sessions`
the sign-in sessions, `records` the one open call and the one bounded reader of every record, `runs`
reads run and evaluation folders into escaped views (a damaged one as such), `steps` pages
trajectories, `server` binds and serves. See docs/web.md.
"""

from harness.web.app import Console, make_app
from harness.web.runs import Roots
from harness.web.server import WebServer, default_roots, make_web_server

__all__ = ["Console", "Roots", "WebServer", "default_roots", "make_app", "make_web_server"]
