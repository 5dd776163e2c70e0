"""`pip_download`: the host downloads wheels after approval; the sandbox installs them offline.

The host downloads wheels only, for the sandbox's Python version and platform, into a temporary
wheelhouse with `harness.environments.wheelhouse.download_wheels`: `pip download --only-binary=:all:
--no-deps`, one level of dependencies at a time, so pip never follows a dependency's URL and no package
code (no sdist build backend) runs on the host; a dependency given as a URL is refused. The wheels are
copied into the sandbox and installed there with `pip install --no-index --find-links` (the sandbox
itself never has network).
"""

from __future__ import annotations

import hashlib
import re
import shlex
import tempfile
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

from harness import checks
from harness.config import Config
from harness.environments.wheelhouse import WheelhouseError, download_wheels
from harness.errors import TaskError, ToolArgumentsError, ToolError
from harness.tools.base import ToolContext
from harness.tools.outbound.action import OutboundAction, Prepared
from harness.tools.outbound.preview import field_lines, masked_url, operator_value
from sandbox.api import quiet
from sandbox.text import escape_ident

WHEELHOUSE = "/tmp/harness/wheelhouse"
DEFAULT_INDEX = "https://pypi.org/simple"
EXAMPLE = {"requirement": "attrs==23.2.0", "key": "attrs-23.2"}
MAX_PLATFORMS = 60
TARGET_PROBE = ("import sys\nfrom pip._vendor.packaging import tags\nseen = []\n"
                "for t in tags.sys_tags():\n    seen += [t.platform] if t.platform not in seen else []\n"
                "print('%d.%d' % sys.version_info[:2], *seen)")


def _prepare_with(config: Config) -> Any:
    def prepare(args: dict[str, Any], ctx: ToolContext) -> Prepared:
        text = str(args["requirement"]).strip()
        req = Requirement(_requirement(text))
        if req.marker:
            raise ToolArgumentsError(f"pip_download: requirement {escape_ident(text)!r} has an environment marker; "
                                     "only "
                                     f"index packages are allowed, e.g. {EXAMPLE}")
        index = config.approval.pip_index_url or DEFAULT_INDEX
        version, platforms = _sandbox_target(ctx, config.sandbox.python)
        # an index URL may carry the operator's user and password: stored and shown hidden, with its
        # hash; the URL itself is read again from the configuration when the download runs
        shown = masked_url(index)
        resolved = {"requirement": str(req), "index_url": shown, "python_version": version,
                    "platforms": platforms, "index_url_sha256": hashlib.sha256(index.encode()).hexdigest()}
        if shown != index:
            shown += "  " + operator_value("user and password from the operator's pip index URL setting")
        preview = field_lines([
            ("package", escape_ident(req.name)), ("version", escape_ident(str(req.specifier) or "(latest)")),
            ("extras", escape_ident(",".join(sorted(req.extras)) or "(none)")), ("index", escape_ident(shown)),
            ("python", f"{version}" + (f" on {platforms[0]} (+{len(platforms) - 1} compatible platform tags)"
                                       if platforms else " (platform: the host's)")),
            ("what runs", ("host: pip download --only-binary=:all: --no-deps per dependency level (wheels only, "
                           "index only)")),
            ("then", f"sandbox: pip install --no-index --find-links {WHEELHOUSE} (offline)")])
        return Prepared(args=resolved, preview="\n".join(preview))
    return prepare


def _sandbox_target(ctx: ToolContext, default_version: str) -> tuple[str, list[str]]:
    """The sandbox's Python version and platform tags (best first), so the host fetches wheels that
    install there; the configured version and the host's platform when the sandbox cannot say."""
    found = ctx.sandbox.exec(f"python -c {shlex.quote(TARGET_PROBE)}", timeout=60, save_output=False)
    words = found.stdout.text.split() if found.ok else []
    if not words or not re.fullmatch(r"\d+\.\d+", words[0]):
        return default_version, []
    return words[0], words[1:1 + MAX_PLATFORMS]


def _requirement(text: str) -> str:
    """`text` through the one requirement check (any version range; no URL, option or path)."""
    try:
        return checks.requirement(text, "pip_download", pinned=False)
    except TaskError as exc:
        raise ToolArgumentsError(f"{escape_ident(str(exc))}; only index packages are allowed, e.g. {EXAMPLE}") from exc


def _download(args: dict[str, Any], index: str, dest: Path) -> list[Path]:
    flags = ["--python-version", args["python_version"], "--index-url", index, "--no-cache-dir",
             *[flag for platform in args.get("platforms", []) for flag in ("--platform", platform)]]
    try:
        download_wheels([_requirement(args["requirement"])], args["python_version"], dest, flags, quiet)
    except WheelhouseError as exc:
        raise ToolError(f"pip download {args['requirement']} from {args['index_url']} failed; nothing was "
                        f"installed: {exc}") from exc
    return sorted(dest.glob("*.whl"))


def _execute_with(config: Config) -> Any:
    def execute(args: dict[str, Any], ctx: ToolContext) -> str:
        index = config.approval.pip_index_url or DEFAULT_INDEX
        if hashlib.sha256(index.encode()).hexdigest() != args["index_url_sha256"]:
            raise ToolError("the package index URL changed since the download was approved; nothing was "
                            "downloaded. Ask again with a new key.")
        return _execute(args, index, ctx)
    return execute


def _execute(args: dict[str, Any], index: str, ctx: ToolContext) -> str:
    with tempfile.TemporaryDirectory(prefix="harness-wheelhouse-") as tmp:
        wheels = _download(args, index, Path(tmp))
        if not wheels:
            raise ToolError(f"pip download {args['requirement']} produced no wheel (source-only package?); "
                            "nothing was installed")
        lines = [f"downloaded {len(wheels)} wheel(s) from {args['index_url']} on the host:"]
        for wheel in wheels:
            data = wheel.read_bytes()
            ctx.sandbox.write_file(f"{WHEELHOUSE}/{wheel.name}", data)
            lines.append(f"  {wheel.name}  {len(data)} bytes  sha256 {hashlib.sha256(data).hexdigest()[:16]}")
    install = (f"python -m pip install --no-index --find-links {WHEELHOUSE} "
               f"{shlex.quote(args['requirement'])}")
    result = ctx.sandbox.exec(install, timeout=300)
    lines.append(f"\nin the sandbox: {install}\nexit code {result.exit_code}")
    output = (result.stdout.text + result.stderr.text).strip().splitlines()
    lines += output[-20:]
    if not result.ok:
        lines.append(f"the install failed; the wheels stay in {WHEELHOUSE} (run the command above again "
                     "with the shell tool after fixing the cause; no new download is needed)")
    return "\n".join(lines)


def pip_download_action(config: Config) -> OutboundAction:
    return OutboundAction(
        name="pip_download",
        description=("Download a Python package (and its dependencies) from the package index and install it "
                     "in the sandbox. The sandbox has no network, so `pip install NAME` fails there; use this "
                     "instead. Give a requirement such as `attrs==23.2.0` or `requests>=2.31`."),
        parameters={"type": "object", "required": ["requirement"], "additionalProperties": False,
                    "properties": {"requirement": {"type": "string", "minLength": 1, "maxLength": 200,
                                                   "description": "a PEP 508 requirement without URL"}}},
        prepare=_prepare_with(config), execute=_execute_with(config), example=EXAMPLE)
