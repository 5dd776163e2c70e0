"""The gateway: the one service a sandboxed agent reaches, answering its model calls from the host.

`Gateway.handle` takes each HTTP request the agent makes (`sandbox.loopback.HttpRequest`) and answers it
(`HttpResponse`). It serves model calls only, in two dialects, both forwarded to one harness `Model`:

    POST /v1/chat/completions, /chat/completions   OpenAI Chat Completions (harness.gateway.openai_api)
    POST /v1/messages                              Anthropic Messages (harness.gateway.anthropic_api)
    GET  /v1/models, /models                       the one model served

A proxy-form request naming the loopback itself (`POST http://127.0.0.1:PORT/v1/messages`, what a client
whose proxy variable points here sends) is the same request. Anything else (CONNECT, a proxy request to
another host `GET http://pypi.org/...`, another path or method) is refused at
once with 403 and an explanation, in the reason phrase too. The request's Authorization / x-api-key is
ignored: the real key lives in the Model on the host. Calls are serialised, metered, held to the run's
budgets (a call beyond one is answered 400, which SDKs do not retry, and `exhausted` names it) and
recorded in calls.jsonl (`harness.gateway.record`).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal

from harness.errors import ModelError, ModelTruncated, ScriptExhausted
from harness.gateway import anthropic_api, openai_api
from harness.gateway._wire import BadRequest, ParsedCall, cut_at_stop, json_answer, sse_answer
from harness.gateway.metering import BudgetSpent, GatewayBudgets, Meter, Totals
from harness.gateway.record import CallLog, CallRecord, Outcome
from harness.messages import Message, TextBlock
from harness.models import Model, ModelResponse, Usage
from sandbox.loopback import HttpRequest, HttpResponse
from sandbox.text import escape_unsafe

Api = Literal["openai", "anthropic"]
ROUTES: dict[tuple[str, str], Api | Literal["models"]] = {
    ("POST", "/v1/chat/completions"): "openai", ("POST", "/chat/completions"): "openai",
    ("POST", "/v1/messages"): "anthropic",
    ("GET", "/v1/models"): "models", ("GET", "/models"): "models",
}
REFUSED_REASON = ("Forbidden: the sandbox has no network; outbound actions go through the harness approval "
                  "gate (docs/approvals.md)")
EXPLANATION = (
    "This sandbox has no network. The one service at this address is the harness's model gateway: "
    "POST /v1/chat/completions (OpenAI), POST /v1/messages (Anthropic) and GET /v1/models. Nothing else "
    "is forwarded: no proxy, no tunnel, no other path or method.\n"
    "Outbound actions (downloading a package, fetching a page, pushing a branch) are never made from "
    "inside: each is held for a human's approval and then run once by the harness, from the host "
    "(docs/approvals.md). Work with what the sandbox holds (the project's environment is installed), "
    "or say in your answer what you would need from outside.\n")
MAX_QUOTED = 300


class Gateway:
    """Serves `model` to an agent in a sandbox. Thread-safe: requests may arrive on several threads;
    model calls are made one at a time.

    `budgets` bound the run (GatewayBudgets.from_loop(config.loop)); `price` is the model's USD per
    million tokens, [input, output] or [input, output, cache_read, cache_write] (needed for a cost
    budget; without it cost is None); `record` is the calls.jsonl path (None: nothing written);
    `model_name` is what GET /v1/models lists (default `model.name`).
    """

    def __init__(self, model: Model, *, budgets: GatewayBudgets | None = None, price: Sequence[float] | None = None,
                 record: Path | None = None, model_name: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.model = model
        self.model_name = model_name or model.name
        self.meter = Meter(budgets or GatewayBudgets(), price)
        self.log = CallLog(record)
        self._clock = clock
        self._model_lock = threading.Lock()
        self._last: tuple[tuple[Message, ...], Message] | None = None
        self._answered: list[tuple[Usage, str]] = []

    @property
    def exhausted(self) -> BudgetSpent | None:
        """The budget a call was refused for (the runner then stops the agent), or None."""
        return self.meter.spent

    @property
    def totals(self) -> Totals:
        return self.meter.totals

    def conversation(self) -> list[Message]:
        """The messages of the latest model call plus its answer: agents resend their whole history each
        call, so this is the conversation so far (the run's trajectory)."""
        last = self._last
        return [] if last is None else [*last[0], last[1]]

    def answered(self) -> list[tuple[Usage, str]]:
        """The usage and stop reason of each call the model answered, in order (the run's turns)."""
        return list(self._answered)

    def handle(self, request: HttpRequest) -> HttpResponse:
        """The answer to one request from the sandbox; never raises for anything the request holds."""
        method = request.method.upper()
        route = ROUTES.get((method, _path(request.target) or ""))
        if route is None:
            return self._refuse(request, method)
        if route == "models":
            self.log.write(CallRecord(method, request.target, 200, "answered"))
            return json_answer(200, "OK", openai_api.models_list(self.model_name))
        return self._model_call(request, route)

    def _refuse(self, request: HttpRequest, method: str) -> HttpResponse:
        self.meter.refused()
        target = escape_unsafe(request.target[:MAX_QUOTED])
        what = f"Refused: {escape_unsafe(method[:20])} {target}\n"
        self.log.write(CallRecord(method, request.target, 403, "refused", error=REFUSED_REASON))
        if not request.target.startswith("/"):               # a proxy request or a tunnel: plain text
            body = (what + EXPLANATION).encode("utf-8")
            return HttpResponse(403, REFUSED_REASON, (("Content-Type", "text/plain; charset=utf-8"),
                                                      ("Content-Length", str(len(body)))), body)
        message = what + EXPLANATION
        data = (anthropic_api.error_body(message, "permission_error") if request.header("anthropic-version")
                else openai_api.error_body(message, "permission_error", "forbidden"))
        return json_answer(403, REFUSED_REASON, data)

    def _model_call(self, request: HttpRequest, api: Api) -> HttpResponse:
        parse = openai_api.parse_request if api == "openai" else anthropic_api.parse_request
        try:
            call = parse(request.body)
        except BadRequest as exc:
            self.log.write(CallRecord(request.method, request.target, exc.status, "bad_request", api=api,
                                      error=exc.message))
            example = openai_api.EXAMPLE if api == "openai" else anthropic_api.EXAMPLE
            return _error(api, exc.status, f"{exc.message} (a correct request body: {example})", exc.kind)
        with self._model_lock:
            return self._forward(request, api, call)

    def _forward(self, request: HttpRequest, api: Api, call: ParsedCall) -> HttpResponse:
        record = CallRecord(request.method, request.target, 0, "answered", api=api, stream=call.stream,
                            messages=call.messages, tools=tuple(str(t["name"]) for t in call.tools))
        spent = self.meter.check()
        if spent is not None:
            self.log.write(replace(record, status=400, outcome="budget", error=spent.message))
            return _error(api, 400, spent.message)
        started = self._clock()
        outcome: Outcome = "answered"
        try:
            response = self.model.respond(call.messages, call.tools)
        except ScriptExhausted as exc:
            spent = self.meter.recording_ended(str(exc))
            self.log.write(replace(record, status=400, outcome="budget", error=spent.message))
            return _error(api, 400, spent.message)
        except ModelTruncated as exc:
            if not exc.partial:
                return self._model_failed(api, record, exc, started)
            outcome, response = "truncated", ModelResponse(Message("assistant", (TextBlock(exc.partial),)),
                                                           "max_tokens", Usage(*exc.tokens))
        except ModelError as exc:
            return self._model_failed(api, record, exc, started)
        seconds = self._clock() - started
        response, stop_sequence = _apply_stop(response, call.stop)
        cost = self.meter.add(response.usage, seconds)
        self._last = (call.messages, response.message)
        self._answered.append((response.usage, response.stop_reason))
        self.log.write(replace(record, status=200, outcome=outcome, response=response.message, usage=response.usage,
                               cost_usd=cost, seconds=seconds))
        return _answer(api, call, response, call.model or self.model_name, stop_sequence)

    def _model_failed(self, api: Api, record: CallRecord, exc: ModelError, started: float) -> HttpResponse:
        message = f"the model behind the harness gateway failed: {exc}"
        self.log.write(replace(record, status=502, outcome="model_error", error=str(exc),
                               seconds=self._clock() - started))
        return _error(api, 502, message, "api_error")


LOOPBACK = re.compile(r"http://(127\.0\.0\.1|localhost|\[::1\])(:\d{1,5})?(?=/)", re.IGNORECASE)


def _path(target: str) -> str | None:
    """The path a request asks for, without its query: an origin-form target (`/v1/messages?beta=true`),
    or a proxy-form one naming this loopback (`http://127.0.0.1:PORT/v1/...`: a client that sends its model
    calls through a proxy variable pointing here); None for anything else (another host, CONNECT)."""
    if not target.startswith("/"):
        found = LOOPBACK.match(target)
        if found is None:
            return None
        target = target[found.end():]
    return target.split("?", 1)[0]


def _apply_stop(response: ModelResponse, stop: tuple[str, ...]) -> tuple[ModelResponse, str | None]:
    """`response` cut at the first of the request's stop sequences (a text-only answer; None: none found)."""
    if not stop or response.message.tool_uses:
        return response, None
    text, found = cut_at_stop(response.message.text, stop)
    if found is None:
        return response, None
    return ModelResponse(Message("assistant", (TextBlock(text),)), "stop_sequence", response.usage, response.raw), found


def _answer(api: Api, call: ParsedCall, response: ModelResponse, model: str, stop_sequence: str | None) -> HttpResponse:
    if api == "openai":
        if call.stream:
            parts = openai_api.chunks(response, model, include_usage=call.include_usage)
            return sse_answer([*((None, c) for c in parts), (None, "[DONE]")])
        return json_answer(200, "OK", openai_api.completion(response, model))
    if call.stream:
        return sse_answer(anthropic_api.events(response, model, stop_sequence))
    return json_answer(200, "OK", anthropic_api.message_body(response, model, stop_sequence))


REASONS = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}


def _error(api: Api, status: int, message: str, kind: str = "invalid_request_error") -> HttpResponse:
    data = openai_api.error_body(message, kind) if api == "openai" else anthropic_api.error_body(message, kind)
    return json_answer(status, REASONS.get(status, "Error"), data)
