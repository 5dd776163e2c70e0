"""The web console (`harness web`): runs, trajectories, patches, evaluation reports and approvals.

`app` is the ASGI app and its guard (sign-in, Host/Origin/CSRF checks, security headers), `runs`
reads run and evaluation folders into escaped views, `server` binds and serves. See docs/web.md.
"""
