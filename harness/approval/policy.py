"""Approval policies: which outbound requests a rule decides and which go to a human.

A policy file (TOML) is a list of rules tried in order; the first that matches decides:

    [[rules]]
    name = "pinned-packages"          # recorded with every decision the rule makes
    tool = "pip_download"             # a tool name or a glob ("*")
    decision = "approve"              # approve | deny | ask
    match = { requirement = "(attrs|six)==[0-9.]+", index_url = "https://pypi\\.org/simple/?" }

    [[rules]]
    name = "only-our-api"
    tool = "http_request"
    decision = "deny"
    unless = { url = "https://api\\.example\\.com/.*" }

    [[rules]]
    name = "no-session-notes"
    tool = "http_request"
    decision = "deny"
    match = { "header.X-Session-Note" = ".+" }

`match` and `unless` map argument names (of the request as it will run) to regular expressions
matched against the whole value. Headers of `http_request` are reachable too: `header.NAME` is the
value of header NAME (any case; "" when absent) and `headers` is every header the model sent, one
`Name: value` line each, sorted (`unless = { headers = "(Accept: [^\\n]*)?" }` allows at most an
Accept header). A rule applies when every `match` pattern matches and not every `unless` pattern
does. Nothing matches: the run's mode decides (ask a human, or deny when unattended).
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from harness.errors import ConfigError

Decision = Literal["approve", "deny", "ask"]
"""What a rule decides; "ask" leaves the request to the run's approval mode."""
DECISIONS: tuple[Decision, ...] = get_args(Decision)
RULE_KEYS = ("name", "tool", "decision", "match", "unless", "reason")
EXAMPLE = ('[[rules]]\nname = "pinned"\ntool = "pip_download"\ndecision = "approve"\n'
           'match = { requirement = "attrs==23\\\\..*" }')


@dataclass(frozen=True)
class Rule:
    name: str
    tool: str
    decision: Decision
    match: dict[str, re.Pattern[str]] = field(default_factory=dict)
    unless: dict[str, re.Pattern[str]] = field(default_factory=dict)
    reason: str = ""

    def applies(self, tool: str, args: Mapping[str, Any]) -> bool:
        if not fnmatch.fnmatchcase(tool, self.tool):
            return False
        if not all(p.fullmatch(value_of(args, k)) for k, p in self.match.items()):
            return False
        return not self.unless or not all(p.fullmatch(value_of(args, k)) for k, p in self.unless.items())


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    rule: str | None         # the rule's name; None when no rule matched
    reason: str


@dataclass(frozen=True)
class Policy:
    rules: tuple[Rule, ...] = ()
    source: str = "(no policy file)"

    def decide(self, tool: str, args: Mapping[str, Any]) -> Verdict:
        for rule in self.rules:
            if rule.applies(tool, args):
                reason = rule.reason or f"{rule.decision} by rule {rule.name!r} of {self.source}"
                return Verdict(rule.decision, rule.name, reason)
        return Verdict("ask", None, "no policy rule matched")


def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else str(value)


def value_of(args: Mapping[str, Any], key: str) -> str:
    """The text a pattern is matched against: an argument, `header.NAME`, or `headers` (see above)."""
    headers = args.get("headers")
    if isinstance(headers, Mapping) and key == "headers":
        return "\n".join(f"{name}: {_text(value)}" for name, value in sorted(headers.items()))
    if key.lower().startswith("header.") and key not in args:
        wanted = key[len("header."):].lower()
        found = headers.items() if isinstance(headers, Mapping) else ()
        return next((_text(v) for name, v in found if str(name).lower() == wanted), "")
    return _text(args.get(key))


def _patterns(raw: Any, where: str) -> dict[str, re.Pattern[str]]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a table of argument = regex, got {raw!r}; example:\n{EXAMPLE}")
    out: dict[str, re.Pattern[str]] = {}
    for key, pattern in raw.items():
        try:
            out[key] = re.compile(str(pattern))
        except re.error as exc:
            raise ConfigError(f"{where}.{key}: {pattern!r} is not a valid regular expression ({exc})") from exc
    return out


def _rule(raw: Any, where: str) -> Rule:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a table, got {raw!r}; example:\n{EXAMPLE}")
    problems = [f"unknown key {k!r} (expected some of {list(RULE_KEYS)})" for k in raw if k not in RULE_KEYS]
    for required in ("name", "tool", "decision"):
        if not isinstance(raw.get(required), str):
            problems.append(f"{required!r} is required and must be a string")
    if raw.get("decision") not in DECISIONS:
        problems.append(f"decision {raw.get('decision')!r} must be one of {list(DECISIONS)}")
    if problems:
        raise ConfigError(f"{where}: " + "; ".join(problems) + f". Example:\n{EXAMPLE}")
    return Rule(name=raw["name"], tool=raw["tool"], decision=raw["decision"],
                match=_patterns(raw.get("match", {}), f"{where}.match"),
                unless=_patterns(raw.get("unless", {}), f"{where}.unless"), reason=str(raw.get("reason", "")))


def load_policy(path: Path | None) -> Policy:
    """Read a policy file; None gives the empty policy (every request goes to the mode's default)."""
    if path is None:
        return Policy()
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read the approval policy {path}: {exc}; expected TOML such as:\n{EXAMPLE}") from exc
    extra = sorted(set(data) - {"rules"})
    if extra:
        raise ConfigError(f"{path}: unknown top-level key(s) {extra}; a policy has only [[rules]]:\n{EXAMPLE}")
    rules = data.get("rules", [])
    if not isinstance(rules, list):
        raise ConfigError(f"{path}: `rules` must be an array of tables ([[rules]]); example:\n{EXAMPLE}")
    return Policy(tuple(_rule(r, f"{path} rules[{i}]") for i, r in enumerate(rules)), source=str(path))
