"""The exec channel's in-sandbox end: one long-lived process per session, standard library only,
running on the sandbox's own Python (3.9 or newer).

It reads request frames from stdin and writes answer frames to stdout (`sandbox/_protocol.py`). There
is no network in the sandbox; the host reaches it through the stdin/stdout of a `docker exec`. The
image ships this package and the protocol module as /opt/harness/channel/sandbox/..., with
`__main__.py` at /opt/harness/channel/ so that `python3 -I -S -u /opt/harness/channel` runs it.

- guard.py: the non-dumpable guard, put up before anything else (`__main__.py` calls it first);
- serve.py: the request loop, the dispatch of operations;
- loop.py: `exec`: spawn, the read loop over the command's pipes, timeout;
- capture.py: one output stream kept in bounded pieces (head, tail, error lines, saved file);
- processes.py: the leftover sweep and the bash started ahead for the next command;
- files.py: read, write (compare-and-swap on expect_sha256), tar in and out;
- relay.py, http_wire.py: the loopback relay (its own process, as nobody: `__main__.py relay PORT`) and the
  HTTP/1.x it reads and writes.
"""
