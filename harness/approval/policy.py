"""Approval policies: which outbound requests a rule decides and which go to a human.

A policy file (TOML) is a list of rules. Every rule that applies to a request is found, and the
**strictest** of them decides: deny over ask over approve (among rules of the same decision, the first in
the file is named). Order never changes an outcome, so a broad approve rule added later cannot override a
deny, and no rule applying means "ask" (a human, or a denial when the run is unattended).

    [[rules]]
    name = "pinned-packages"          # recorded with every decision the rule makes
    tool = "pip_download"             # a tool name or a glob ("*")
    decision = "approve"              # approve | deny | ask
    match = { requirement = "(attrs|six)==[0-9.]+", index_url = "https://pypi\\.org/simple/?" }
    examples_match = [{ tool = "pip_download", arguments = { requirement = "attrs==23.2.0",
                                                             index_url = "https://pypi.org/simple" } }]
    examples_not_match = [{ tool = "pip_download", arguments = { requirement = "attrs>=1" } }]

    [[rules]]
    name = "only-our-api"
    tool = "http_request"
    decision = "deny"
    unless = { url = "https://api\\.example\\.com/.*" }

`match` and `unless` map argument names (of the request as it will run) to regular expressions
matched against the whole value. Headers of `http_request` are reachable too: `header.NAME` is the
value of header NAME (any case; "" when absent) and `headers` is every header the model sent, one
`Name: value` line each, sorted (`unless = { headers = "(Accept: [^\\n]*)?" }` allows at most an
Accept header). A rule applies when its `tool` glob matches, every `match` pattern matches and not every
`unless` pattern does.

`examples_match` / `examples_not_match` are requests (tool and arguments, as the rule sees them) the
rule must / must not apply to; a file whose example does not behave as stated is refused at load, naming
the rule, the example and what the rule matched instead.

A file written for the old first-match order loads unchanged; where a less strict rule came before a
stricter one for the same tools (approve before deny or ask, ask before deny), the requests both apply to
are now decided by the stricter one, and `load_policy` warns naming each such pair (`Policy.warnings`).

On top of the rules, the MCP tool hints (`harness.mcp.specs.hint_ceiling`) can only turn an approve into
an ask: a destructive, open-world, unannotated or untrusted server's tool is never approved by a rule.
"""

from __future__ import annotations

import fnmatch
import logging
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from harness.errors import ConfigError
from harness.mcp.specs import hint_ceiling

Decision = Literal["approve", "deny", "ask"]
"""What a rule decides; "ask" leaves the request to the run's approval mode."""
DECISIONS: tuple[Decision, ...] = get_args(Decision)
STRICTNESS: dict[Decision, int] = {"approve": 0, "ask": 1, "deny": 2}
"""Higher wins when several rules apply."""
HINT_RULE = "mcp-tool-hints"
"""The name a verdict carries when the MCP tool hints turned it into an ask."""
RULE_KEYS = ("name", "tool", "decision", "match", "unless", "reason", "examples_match", "examples_not_match")
EXAMPLE = ('[[rules]]\nname = "pinned"\ntool = "pip_download"\ndecision = "approve"\n'
           'match = { requirement = "attrs==23\\\\..*" }\n'
           'examples_match = [{ tool = "pip_download", arguments = { requirement = "attrs==23.2.0" } }]')
log = logging.getLogger(__name__)
_WARNED: set[str] = set()
"""Warnings already logged by this process: every session of an evaluation loads the policy again."""


@dataclass(frozen=True)
class Example:
    """A request as a rule sees it: the tool's name and its arguments (as they will run)."""

    tool: str
    arguments: dict[str, Any]

    def shown(self) -> str:
        return f"{self.tool} {self.arguments!r}"


@dataclass(frozen=True)
class Check:
    """One part of a rule held against one request: the tool glob, or one match / unless pattern."""

    part: Literal["tool", "match", "unless"]
    key: str
    pattern: str
    value: str
    matched: bool


@dataclass(frozen=True)
class Rule:
    name: str
    tool: str
    decision: Decision
    match: dict[str, re.Pattern[str]] = field(default_factory=dict)
    unless: dict[str, re.Pattern[str]] = field(default_factory=dict)
    reason: str = ""
    examples_match: tuple[Example, ...] = ()
    examples_not_match: tuple[Example, ...] = ()

    def checks(self, tool: str, args: Mapping[str, Any]) -> list[Check]:
        """Every part of this rule against the request, in order: tool, match patterns, unless patterns."""
        out = [Check("tool", "tool", self.tool, tool, fnmatch.fnmatchcase(tool, self.tool))]
        for part, patterns in (("match", self.match), ("unless", self.unless)):
            for key, pattern in patterns.items():
                value = value_of(args, key)
                out.append(Check(part, key, pattern.pattern, value, pattern.fullmatch(value) is not None))  # type: ignore[arg-type]
        return out

    def applies(self, tool: str, args: Mapping[str, Any]) -> bool:
        return applies(self.checks(tool, args))


def applies(checks: list[Check]) -> bool:
    """A rule applies when its tool and every match pattern match and not every unless pattern does."""
    unless = [c.matched for c in checks if c.part == "unless"]
    return all(c.matched for c in checks if c.part != "unless") and not (unless and all(unless))


def why(checks: list[Check]) -> str:
    """What a rule matched and did not match, for a person reading an error or `explain`."""
    said = []
    for c in checks:
        verb = "matches" if c.matched else "does not match"
        said.append(f"{c.part} {c.key} {c.value!r} {verb} {c.pattern!r}")
    unless = [c for c in checks if c.part == "unless"]
    if unless and all(c.matched for c in unless):
        said.append("every unless pattern matches, so the rule does not apply")
    return "; ".join(said)


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    rule: str | None         # the deciding rule's name; None when no rule matched
    reason: str
    matched: tuple[str, ...] = ()    # every rule that applies, in file order


@dataclass(frozen=True)
class Policy:
    rules: tuple[Rule, ...] = ()
    source: str = "(no policy file)"
    warnings: tuple[str, ...] = ()

    def matching(self, tool: str, args: Mapping[str, Any]) -> list[Rule]:
        return [rule for rule in self.rules if rule.applies(tool, args)]

    def decide(self, tool: str, args: Mapping[str, Any]) -> Verdict:
        """The strictest applying rule's decision (deny > ask > approve), then the MCP hint ceiling."""
        verdict = self._by_rules(tool, args)
        ceiling = hint_ceiling(tool, args)
        if ceiling is not None and (verdict.decision == "approve" or verdict.rule is None):
            said = f"rule {verdict.rule!r} would approve it, but " if verdict.decision == "approve" else ""
            return Verdict("ask", HINT_RULE, f"{said}{ceiling}: a person decides", verdict.matched)
        return verdict

    def _by_rules(self, tool: str, args: Mapping[str, Any]) -> Verdict:
        found = self.matching(tool, args)
        names = tuple(rule.name for rule in found)
        if not found:
            return Verdict("ask", None, "no policy rule matched")
        strictest = max(found, key=lambda r: STRICTNESS[r.decision])     # the first of the strictest
        others = [r for r in found if r is not strictest]
        over = (f" (strictest of {len(found)} matching rules: it wins over "
                + ", ".join(f"{r.name!r} ({r.decision})" for r in others) + ")") if others else ""
        reason = strictest.reason or f"{strictest.decision} by rule {strictest.name!r} of {self.source}{over}"
        return Verdict(strictest.decision, strictest.name, reason, names)


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


def example_of(raw: Any, where: str) -> Example:
    """A request written as `{ tool = "NAME", arguments = { ... } }` (a policy example, a REQUEST.json)."""
    if (not isinstance(raw, Mapping) or set(raw) - {"tool", "arguments"} or not isinstance(raw.get("tool"), str)
            or not isinstance(raw.get("arguments", {}), Mapping)):
        raise ConfigError(f"{where} must be a request {{ tool = \"NAME\", arguments = {{ ... }} }}, got {raw!r}; "
                          'e.g. { tool = "http_request", arguments = { method = "GET", url = "https://a.example/x" } }')
    return Example(raw["tool"], dict(raw.get("arguments", {})))


def _examples(raw: Any, where: str) -> tuple[Example, ...]:
    if not isinstance(raw, list):
        raise ConfigError(f"{where} must be an array of requests, got {raw!r}; example:\n{EXAMPLE}")
    return tuple(example_of(item, f"{where}[{i}]") for i, item in enumerate(raw))


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
                unless=_patterns(raw.get("unless", {}), f"{where}.unless"), reason=str(raw.get("reason", "")),
                examples_match=_examples(raw.get("examples_match", []), f"{where}.examples_match"),
                examples_not_match=_examples(raw.get("examples_not_match", []), f"{where}.examples_not_match"))


def example_problems(rule: Rule, where: str) -> list[str]:
    """Each example of `rule` that does not behave as the file says, with what the rule matched instead."""
    problems = []
    for stated, examples in ((True, rule.examples_match), (False, rule.examples_not_match)):
        for i, ex in enumerate(examples):
            checks = rule.checks(ex.tool, ex.arguments)
            if applies(checks) != stated:
                listed = "examples_match" if stated else "examples_not_match"
                outcome = "does not apply to it" if stated else "applies to it"
                problems.append(f"{where} (rule {rule.name!r}) {listed}[{i}] {ex.shown()}: the rule {outcome}; "
                                f"what it matched instead: {why(checks)}")
    return problems


def order_warnings(rules: tuple[Rule, ...], source: str) -> tuple[str, ...]:
    """Pairs whose outcome first-match order decided differently: a less strict rule before a stricter one
    for overlapping tools. Requests both apply to were decided by the first; now by the stricter."""
    said = []
    for i, first in enumerate(rules):
        for later in rules[i + 1:]:
            if STRICTNESS[later.decision] > STRICTNESS[first.decision] and _overlap(first.tool, later.tool):
                said.append(f"{source}: rule {first.name!r} ({first.decision}) comes before rule {later.name!r} "
                            f"({later.decision}) for tool {_tools(first.tool, later.tool)}: a request both apply to "
                            f"was decided by {first.name!r} in file order and is now decided by {later.name!r} "
                            "(strictest wins). Move the stricter rule first to say you meant it")
    return tuple(said)


def _tools(a: str, b: str) -> str:
    return repr(a) if a == b else f"{a!r}/{b!r}"


def _overlap(a: str, b: str) -> bool:
    """Whether two tool globs can name one tool (conservatively: their literal starts agree)."""
    if a == b or fnmatch.fnmatchcase(a, b) or fnmatch.fnmatchcase(b, a):
        return True
    start_a, start_b = (re.split(r"[*?\[]", glob, maxsplit=1)[0] for glob in (a, b))
    wild = any(ch in a for ch in "*?[") and any(ch in b for ch in "*?[")
    return wild and (start_a.startswith(start_b) or start_b.startswith(start_a))


def load_policy(path: Path | None) -> Policy:
    """Read a policy file; None gives the empty policy (every request goes to the mode's default).
    Refused (ConfigError) when it is malformed or one of its examples does not behave as stated."""
    if path is None:
        return Policy()
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read the approval policy {path}: {exc}; expected TOML such as:\n{EXAMPLE}") from exc
    extra = sorted(set(data) - {"rules"})
    if extra:
        raise ConfigError(f"{path}: unknown top-level key(s) {extra}; a policy has only [[rules]]:\n{EXAMPLE}")
    raw_rules = data.get("rules", [])
    if not isinstance(raw_rules, list):
        raise ConfigError(f"{path}: `rules` must be an array of tables ([[rules]]); example:\n{EXAMPLE}")
    rules = tuple(_rule(r, f"{path} rules[{i}]") for i, r in enumerate(raw_rules))
    problems = [p for i, rule in enumerate(rules) for p in example_problems(rule, f"{path} rules[{i}]")]
    if problems:
        raise ConfigError(f"the approval policy {path} is refused: {len(problems)} example(s) do not behave as "
                          "stated:\n" + "\n".join(f"- {p}" for p in problems))
    warnings = order_warnings(rules, str(path))
    for warning in warnings:
        if warning not in _WARNED:
            _WARNED.add(warning)
            log.warning("%s", warning)
    return Policy(rules, source=str(path), warnings=warnings)
