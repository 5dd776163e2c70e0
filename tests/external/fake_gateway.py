"""A stand-in for the model gateway, run INSIDE a sandbox by its /usr/bin/python3 (standard library only).

    python3 fake_gateway.py PORT SCRIPT.json LOG

Answers POST /v1/chat/completions with the next answer of SCRIPT (a list of {"content": ..., "tool":
optional bash command as an OpenAI tool call}; the last one repeats), GET /v1/models with one model,
and refuses every proxy request (CONNECT or an absolute URL) with 403, as the real gateway does. Each
request is a line of LOG: "MODEL <path> tools=<bool> stream=<value>" or "PROXY <method> <target>".
"""

from __future__ import annotations

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, SCRIPT, LOG = int(sys.argv[1]), json.load(open(sys.argv[2])), sys.argv[3]
CALLS: list[int] = []


def log(line: str) -> None:
    with open(LOG, "a") as f:
        f.write(line + "\n")


class Gateway(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def _refuse(self) -> None:
        log(f"PROXY {self.command} {self.path}")
        self.send_response(403, "the gateway forwards model requests only")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _json(self, value: object) -> None:
        data = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_CONNECT(self) -> None:
        self._refuse()

    def do_GET(self) -> None:
        if not self.path.startswith("/"):
            return self._refuse()
        log(f"GET {self.path}")
        self._json({"object": "list", "data": [{"id": "test-model", "object": "model"}]})

    def do_POST(self) -> None:
        if not self.path.startswith("/"):
            return self._refuse()
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        log(f"MODEL {self.path} tools={'tools' in body} stream={body.get('stream')}")
        step = SCRIPT[min(len(CALLS), len(SCRIPT) - 1)]
        CALLS.append(1)
        message: dict[str, object] = {"role": "assistant", "content": step.get("content", "")}
        if "tool" in step:
            message["tool_calls"] = [{"id": f"call_{len(CALLS)}", "type": "function", "function": {
                "name": "bash", "arguments": json.dumps({"command": step["tool"]})}}]
        self._json({"id": f"c{len(CALLS)}", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model"), "usage": {"prompt_tokens": 10, "completion_tokens": 5,
                                                          "total_tokens": 15},
                    "choices": [{"index": 0, "message": message,
                                 "finish_reason": "tool_calls" if "tool" in step else "stop"}]})


server = ThreadingHTTPServer(("127.0.0.1", PORT), Gateway)
log("READY")
server.serve_forever()
