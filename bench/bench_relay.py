"""Loopback relay benchmark: an HTTP call made inside a sandbox to its own 127.0.0.1, answered on the host.

    .venv/bin/python bench/bench_relay.py [--rounds 500] [--big-rounds 30] [--image TAG]

One client script (Python's http.client on one keep-alive connection, as an OpenAI SDK keeps its
connections) runs twice in the same run: inside a sandbox against `DockerSandbox.serve_loopback`, and,
as the baseline, on the host against a plain `http.server` (ThreadingHTTPServer) on the host's loopback
serving the very same handler. Prints p50/p95 of a small POST (1 KiB body, a short JSON answer) for
both, the p50 the relay adds in ms and the ratio, and bytes/s of a 1 MiB body each way (uploaded to
the handler, and answered by it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox.api import SandboxSpec  # noqa: E402
from sandbox.docker_sandbox import DockerSandbox  # noqa: E402
from sandbox.images import ensure_image  # noqa: E402
from sandbox.loopback import HttpRequest, HttpResponse  # noqa: E402

MIB = 1024 * 1024
PORT = 18400
# argv: port, rounds, request body size, answer body size; prints the seconds of each call as JSON
CLIENT = """
import http.client, json, sys, time
port, rounds, size, answer = (int(a) for a in sys.argv[1:5])
body = b"x" * size
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
out = []
for i in range(rounds + 3):
    started = time.perf_counter()
    c.request("POST", "/v1/chat/completions", body=body,
              headers={"Content-Type": "application/json", "X-Answer-Bytes": str(answer)})
    r = c.getresponse()
    got = r.read()
    if r.status != 200 or (answer and len(got) != answer):
        raise SystemExit(f"call {i}: status {r.status}, {len(got)} bytes")
    if i >= 3:   # three calls of warm-up
        out.append(time.perf_counter() - started)
print(json.dumps(out))
"""
SMALL_ANSWER = json.dumps({"id": "chatcmpl-1", "object": "chat.completion",
                           "choices": [{"message": {"role": "assistant", "content": "ok"}}]}).encode()


def handler(request: HttpRequest) -> HttpResponse:
    """The gateway's stand-in: a short JSON answer, or as many bytes as X-Answer-Bytes asks."""
    size = int(request.header("X-Answer-Bytes") or 0)
    body = b"y" * size if size else SMALL_ANSWER
    return HttpResponse(200, "OK", (("Content-Type", "application/json"),), body)


class Baseline(BaseHTTPRequestHandler):
    """`handler` behind Python's own http.server: what the relay is compared with."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True   # its headers and body are two writes: without it, 40 ms of delayed ACK

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        answer = handler(HttpRequest(self.command, self.path, tuple(self.headers.items()), body))
        self.send_response(answer.status, answer.reason)
        for name, value in answer.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        self.wfile.write(answer.body)

    def log_message(self, format: str, *args: object) -> None:   # noqa: A002 - http.server's name
        return


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _row(name: str, values: list[float]) -> float:
    p50, p95 = _pct(values, 0.5) * 1e3, _pct(values, 0.95) * 1e3
    print(f"  {name:<40} p50 {p50:8.3f} ms   p95 {p95:8.3f} ms   (n={len(values)})")
    return p50


def _rate(name: str, values: list[float]) -> None:
    print(f"  {name:<40} {MIB * len(values) / sum(values) / 1e6:8.1f} MB/s   "
          f"(p50 {_pct(values, 0.5) * 1e3:.1f} ms per MiB, n={len(values)})")


def inside(box: DockerSandbox, rounds: int, size: int, answer: int) -> list[float]:
    box.write_file("/tmp/bench_client.py", CLIENT.encode())
    result = box.exec(f"python3 /tmp/bench_client.py {PORT} {rounds} {size} {answer}", timeout=600)
    if not result.ok:
        raise SystemExit(f"the client inside failed: {result.stderr.text[-2000:]}")
    values: list[float] = json.loads(result.stdout.text)
    return values


def on_host(port: int, rounds: int, size: int, answer: int) -> list[float]:
    proc = subprocess.run([sys.executable, "-c", CLIENT, str(port), str(rounds), str(size), str(answer)],
                          capture_output=True, text=True, timeout=600, check=True)
    values: list[float] = json.loads(proc.stdout)
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=500, help="small POSTs per path (default 500)")
    parser.add_argument("--big-rounds", type=int, default=30, help="1 MiB calls per path and direction")
    parser.add_argument("--image", default=None, help="sandbox image tag (default: built if needed)")
    args = parser.parse_args()
    image = args.image or ensure_image(python="3.11")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Baseline)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    spec = SandboxSpec(image=image, session=f"bench-{uuid.uuid4().hex[:8]}", labels={"harness.bench": "1"})
    try:
        with DockerSandbox(spec) as box, box.serve_loopback(PORT, handler) as relay:
            print(f"a small POST (1 KiB body, {len(SMALL_ANSWER)} B JSON answer), one keep-alive connection:")
            base = _row("host client -> host http.server", on_host(port, args.rounds, 1024, 0))
            through = _row("sandbox client -> relay -> host handler", inside(box, args.rounds, 1024, 0))
            print(f"  the relay adds {through - base:.3f} ms at p50 ({through / base:.1f}x the baseline)")
            print("a 1 MiB body:")
            _rate("upload, host http.server", on_host(port, args.big_rounds, MIB, 0))
            _rate("upload, through the relay", inside(box, args.big_rounds, MIB, 0))
            _rate("download, host http.server", on_host(port, args.big_rounds, 0, MIB))
            _rate("download, through the relay", inside(box, args.big_rounds, 0, MIB))
            stats = relay.stats()
            print(f"relay counters: {stats.requests} requests, {stats.bytes_in} bytes in, {stats.bytes_out} out, "
                  f"{stats.refused} refused, {stats.handler_errors} handler errors")
    finally:
        server.shutdown()


if __name__ == "__main__":
    main()
