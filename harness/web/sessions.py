"""Sign-in sessions of the web console: the token the command prints is exchanged, once per browser,
for a session that has nothing in common with it.

- The cookie carries a random session id (`secrets.token_urlsafe(32)`), never the token: cookies
  ignore ports, so every other server on 127.0.0.1 the browser visits receives this server's cookies;
  what it receives there is an id that this server alone knows, and that expires.
- The cookie's name is this server's own (`harness_<port>_<random>`): two consoles on one machine
  never overwrite each other's cookie, and a cookie of another server is not even looked up.
- Each session has its own CSRF secret, random as well, held server-side and given to the page it
  serves: it cannot be computed from the cookie (or from the token).
- A session ends `lifetime` seconds after sign-in (12 h by default, `harness web --session-hours`);
  the table is in memory, so a restarted server asks for the token again.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field

DEFAULT_HOURS = 12.0
MAX_SESSIONS = 1000           # sign-ins kept at once; the oldest goes first


@dataclass(frozen=True)
class Session:
    id: str
    csrf: str
    expires: float            # time.monotonic() when it ends


@dataclass
class Sessions:
    """The server-side table of sessions, and the cookie name they travel under."""
    lifetime: float = DEFAULT_HOURS * 3600
    cookie: str = field(default_factory=lambda: f"harness_{secrets.token_hex(4)}")
    _table: dict[str, Session] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def open(self) -> Session:
        """A new session (after a right token)."""
        now = time.monotonic()
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), now + self.lifetime)
        with self._lock:
            for sid in [sid for sid, s in self._table.items() if s.expires <= now]:
                del self._table[sid]
            while len(self._table) >= MAX_SESSIONS:
                del self._table[next(iter(self._table))]
            self._table[session.id] = session
        return session

    def find(self, cookie_header: str) -> tuple[Session | None, str]:
        """The live session the Cookie header names under this server's cookie name; else None and why."""
        value = ""
        for part in cookie_header.split(";"):
            name, _, got = part.strip().partition("=")
            if name == self.cookie:
                value = got
        if not value:
            return None, "not signed in"
        with self._lock:
            session = self._table.get(value)
            if session is not None and session.expires <= time.monotonic():
                del self._table[value]
                return None, f"your sign-in expired (sessions last {self.lifetime / 3600:g} h)"
        if session is None or not hmac.compare_digest(session.id, value):
            return None, "not signed in (this session is unknown here: the server restarted, or it is another's)"
        return session, ""
