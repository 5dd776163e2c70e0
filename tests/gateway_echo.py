"""An echo model server on the host and a client agent for inside the sandbox, for measuring the model
gateway end to end: client (in the sandbox) -> relay -> gateway -> `OpenAIModel` -> this server.

    with echo_server() as server:            # OpenAI-compatible; answers each call with its last user text
        model = OpenAIModel("echo", api_key="k", config=..., max_tokens=1000, base_url=server.url)
        agent = client_agent(calls=1000, seed=7)      # a `cmd:` agent (standard library only)

The client sends one user message a call (random text of 1 to `max_chars` characters drawn from an
alphabet of ASCII, escapes, quotes, markup, accents, CJK and emoji), checks that the answer's text is the
same, prints `MISMATCH i sent_chars got_chars` for any that is not, and ends with one line `DONE calls
mismatches chain p50_ms p90_ms` (chain: the sha256 of the calls' sha256 digests, in order). Used
by tests/loop/test_gateway_many_calls.py and bench/bench_gateway.py.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ALPHABET = ("abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 .,;:!?()[]{}<>&'\"\\/`~|"
            "\n\n\t\u00e9\u00e0\u00fc\u00df\u4e2d\u6587\u65e5\u672c\U0001f600\U0001f680\u2028\u00a0")

CLIENT = textwrap.dedent("""
    import hashlib, json, os, random, sys, time, urllib.request as u
    calls, seed, max_chars = {calls}, {seed}, {max_chars}
    alphabet = {alphabet}
    rng = random.Random(seed)
    url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
    bad, digests, times = 0, [], []
    for i in range(calls):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, max_chars)))
        body = json.dumps({{"model": os.environ["HARNESS_MODEL"],
                           "messages": [{{"role": "user", "content": text}}]}}).encode()
        started = time.perf_counter()
        request = u.Request(url, data=body, headers={{"Content-Type": "application/json"}})
        with u.urlopen(request, timeout=60) as answer:
            reply = json.loads(answer.read())["choices"][0]["message"]["content"]
        times.append((time.perf_counter() - started) * 1000)
        digests.append(hashlib.sha256(text.encode()).hexdigest())
        if reply != text:
            bad += 1
            print("MISMATCH", i, len(text), len(reply), flush=True)
    times.sort()
    chain = hashlib.sha256("".join(digests).encode()).hexdigest()
    print("DONE", calls, bad, chain, "%.3f" % times[len(times) // 2], "%.3f" % times[len(times) * 9 // 10],
          flush=True)
""")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def chain(digests: list[str]) -> str:
    """The client's `chain` of a list of per-call digests."""
    return sha("".join(digests))


def client_source(calls: int, seed: int, max_chars: int) -> str:
    """The client agent's Python source (standard library only, for the image's /usr/bin/python3)."""
    return CLIENT.format(calls=calls, seed=seed, max_chars=max_chars, alphabet=repr(ALPHABET))


def client_agent(calls: int, seed: int = 7, max_chars: int = 4096) -> str:
    """`--agent` text of a `cmd:` agent running the client inside the sandbox."""
    return f"cmd:python3 -I -c {shlex.quote(client_source(calls, seed, max_chars))}"


def send_json(handler: BaseHTTPRequestHandler, answer: bytes) -> None:
    """Answer the request `handler` serves with 200 and the JSON body `answer`."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(answer)))
    handler.end_headers()
    handler.wfile.write(answer)


@dataclass
class EchoServer:
    url: str
    received: list[str] = field(default_factory=list)    # sha256 of each call's last user text, in order


@contextmanager
def echo_server(alter_call: int | None = None) -> Iterator[EchoServer]:
    """An OpenAI-compatible server on 127.0.0.1 answering each chat completion with its last user text;
    the answer to call number `alter_call` (from 0) has its first character changed (a probe's control)."""
    state = EchoServer(url="")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True   # headers and body are two writes: no 40 ms delayed ACK between them

        def do_POST(self) -> None:  # noqa: N802 - the standard library's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            text = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
            text = text if isinstance(text, str) else "".join(p["text"] for p in text)
            if len(state.received) == alter_call:
                text_out = ("b" if text[0] == "a" else "a") + text[1:]
            else:
                text_out = text
            state.received.append(sha(text))
            answer = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                                 "choices": [{"index": 0, "message": {"role": "assistant", "content": text_out},
                                              "finish_reason": "stop"}],
                                 "usage": {"prompt_tokens": len(text), "completion_tokens": len(text),
                                           "total_tokens": 2 * len(text)}}).encode()
            send_json(self, answer)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
