"""Retries of model API calls: transient failures only, exponential backoff with jitter, bounded.

Transient: HTTP 408, 409, 429 and 5xx (529 "overloaded" included), timeouts and connection failures.
A server's `retry-after` / `retry-after-ms` header is honoured (never beyond retry_max_seconds).
Everything else (401 bad key, 400 bad request, 404 unknown model) fails at once: trying again would
give the same answer. The SDKs' own retries are switched off so that this is the only retry policy.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from tenacity import (
    RetryCallState,
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from harness.config import ModelConfig
from harness.errors import ModelError

T = TypeVar("T")

TRANSIENT_STATUS = frozenset({408, 409, 429})
TRANSIENT_CLASSES = frozenset({"APIConnectionError", "APITimeoutError"})


def http_status_of(exc: BaseException) -> int | None:
    """The HTTP status code a provider SDK's exception carries, if any."""
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def is_transient(exc: BaseException) -> bool:
    """Whether trying the same request again may succeed."""
    status = http_status_of(exc)
    if status is not None:
        return status in TRANSIENT_STATUS or status >= 500
    return any(cls.__name__ in TRANSIENT_CLASSES for cls in type(exc).__mro__)


def retry_after(exc: BaseException | None) -> float | None:
    """The wait a server asked for in its response headers, in seconds, if any."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            continue   # an HTTP date: fall back to our own backoff
    return None


def _wait(config: ModelConfig) -> Callable[[RetryCallState], float]:
    backoff = wait_random_exponential(multiplier=config.retry_initial_seconds, max=config.retry_max_seconds)

    def wait(state: RetryCallState) -> float:
        asked = retry_after(state.outcome.exception() if state.outcome else None)
        return min(config.retry_max_seconds, max(asked or 0.0, backoff(state)))
    return wait


def call_with_retries(fn: Callable[[], T], *, provider: str, config: ModelConfig,
                      api_errors: tuple[type[BaseException], ...],
                      sleep: Callable[[float], None] = time.sleep) -> T:
    """Call `fn`, retrying transient `api_errors`; any API error left becomes a `ModelError`."""
    retrying = Retrying(
        retry=retry_if_exception(lambda e: isinstance(e, api_errors) and is_transient(e)),
        stop=stop_after_attempt(max(1, config.max_retries + 1)),
        wait=_wait(config),
        sleep=sleep, reraise=True)
    try:
        return retrying(fn)
    except api_errors as exc:
        attempts = retrying.statistics.get("attempt_number", 1)
        raise ModelError(describe(exc, provider, attempts)) from exc
    except RetryError as exc:  # only without reraise; kept so a tenacity change stays loud
        raise ModelError(f"{provider} API call failed after retries: {exc}") from exc


def describe(exc: BaseException, provider: str, attempts: int) -> str:
    status = http_status_of(exc)
    what = f"HTTP {status}" if status is not None else type(exc).__name__
    detail = str(exc)[:500]
    if status in (401, 403):
        hint = "check the API key (ANTHROPIC_API_KEY / OPENAI_API_KEY) and its permissions"
    elif status == 404:
        hint = "check the model name, e.g. --model anthropic:claude-sonnet-4-5 or --model openai:gpt-4.1"
    elif status == 400:
        hint = "the request was refused as malformed; the trajectory so far is saved for a bug report"
    elif is_transient(exc):
        hint = (f"gave up after {attempts} attempt(s); raise model.max_retries or try again later")
    else:
        hint = "not retried: this failure is not transient"
    return f"{provider} API call failed ({what}) after {attempts} attempt(s): {detail}; {hint}"
