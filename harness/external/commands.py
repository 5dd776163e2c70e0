"""How each agent of the catalogue is started on a request: its argv, environment and files.

Every agent gets `base_environment`: the gateway as its OpenAI and Anthropic endpoint with a dummy
key, the gateway as its HTTP(S) proxy too (it answers anything but a model request with 403, so a
tool that tries the network fails at once instead of waiting on a dead route), and the switches that
keep litellm, pip and the Hugging Face hub from trying. The task text is written to TASK_FILE.

    mini_swe_agent(spec, request)   mini --yolo --exit-immediately, its settings in a YAML file; the
                                    pinned version chooses the config's shape (1.x or 2.x, `mini_v1`)
    aider(spec, request)            aider --message-file, its settings as --flag=value pairs
    tiny_agent(spec, request)       the example agent of the package, with the image's python3
    shell_command(spec, request)    the operator's `cmd:` command, run with bash
"""

from __future__ import annotations

import json
import math
from importlib import resources

from harness.errors import ConfigError
from harness.external.spec import RUN_DIR, TASK_FILE, AgentInvocation, AgentRequest, AgentSpec, RecordedRun

MINI_CONFIG = f"{RUN_DIR}/mini-run.yaml"
MINI_TRAJECTORY = f"{RUN_DIR}/mini.traj.json"
TINY_AGENT = f"{RUN_DIR}/tiny_agent.py"
AIDER_CONFIG = f"{RUN_DIR}/aider.conf.yml"
AIDER_METADATA = f"{RUN_DIR}/aider-model.json"
AIDER_CHAT_HISTORY = f"{RUN_DIR}/aider.chat.history.md"
AIDER_LLM_HISTORY = f"{RUN_DIR}/aider.llm.history"
AIDER_CONTEXT = 128_000   # the context window aider is told (it knows no size for a gateway's model)
_MINI_ENV = {"MSWEA_CONFIGURED": "true", "MSWEA_SILENT_STARTUP": "1",
             "MSWEA_GLOBAL_CONFIG_DIR": f"{RUN_DIR}/mini-config", "MSWEA_COST_TRACKING": "ignore_errors",
             "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "3"}
# mini 1.x takes its task only as an option: read from the task file, its last newline kept ($(...) drops it)
_MINI_V1_WRAPPER = 't=$(cat -- "$HARNESS_TASK_FILE" && printf .) || exit 2; exec "$@" "--task=${t%.}"'
# aider keeps its repository map's cache in the repository (no option moves it); removed after the run
# unless the project had one, so it never shows in the patch
_AIDER_WRAPPER = ('had=0; [ -e .aider.tags.cache.v4 ] && had=1; "$@"; rc=$?; '
                  '[ "$had" = 1 ] || rm -rf .aider.tags.cache.v4; exit "$rc"')


def base_environment(request: AgentRequest) -> dict[str, str]:
    """The variables every agent runs with (docs/external-agents.md says why each)."""
    proxy = request.gateway
    return {
        "HARNESS_TASK_FILE": TASK_FILE, "HARNESS_MODEL": request.model,
        "OPENAI_BASE_URL": request.base_url, "OPENAI_API_BASE": request.base_url, "OPENAI_API_KEY": request.api_key,
        "ANTHROPIC_BASE_URL": request.gateway, "ANTHROPIC_API_KEY": request.api_key,
        **{name: proxy for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                                    "all_proxy")},
        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
        "PIP_RETRIES": "1", "PIP_TIMEOUT": "10", "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
        "XDG_CONFIG_HOME": f"{RUN_DIR}/config", "XDG_CACHE_HOME": f"{RUN_DIR}/cache",
        "XDG_DATA_HOME": f"{RUN_DIR}/data", "XDG_STATE_HOME": f"{RUN_DIR}/state",
        "PYTHONUNBUFFERED": "1", "NO_COLOR": "1",
    }


def yaml_string(text: str) -> str:
    """`text` as a YAML double-quoted scalar that every YAML 1.1 reader (PyYAML) reads back exactly:
    printable ASCII as it is, everything else escaped (\\xXX, \\uXXXX, \\UXXXXXXXX)."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif code <= 0xFF:
            out.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return "".join(out) + '"'


def yaml_value(value: object) -> str:
    """`value` (JSON's types: mappings with string keys, lists, strings, numbers, booleans, None) as
    one line of YAML flow style that PyYAML reads back exactly; strings through `yaml_string`.

    Raises:
        ConfigError: a value of another type, or a number that is not finite.
    """
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ConfigError(f"the number {value!r} cannot be written to the agent's config; expected a finite one")
        return repr(value)
    if isinstance(value, str):
        return yaml_string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(yaml_value(v) for v in value) + "]"
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return "{" + ", ".join(f"{yaml_string(k)}: {yaml_value(v)}" for k, v in value.items()) + "}"
    raise ConfigError(f"a value of type {type(value).__name__} ({value!r:.80}) cannot be written to the agent's "
                      "config; expected JSON's types (objects, lists, strings, numbers, true/false, null)")


def mini_config(request: AgentRequest, *, textbased: bool) -> str:
    """mini-swe-agent's run settings, merged over its built-in config (`-c mini_textbased.yaml -c this`)."""
    lines = ["run:", f"  task: {yaml_string(request.task)}",
             "agent:", "  mode: yolo", "  confirm_exit: false", "  cost_limit: 0",
             *([f"  step_limit: {request.step_limit}"] if request.step_limit else []),
             "model:", f"  model_name: {yaml_string('openai/' + request.model)}",
             f"  model_class: {'litellm_textbased' if textbased else 'litellm'}",
             "  cost_tracking: ignore_errors",
             "  model_kwargs:", f"    api_base: {yaml_string(request.base_url)}",
             f"    api_key: {yaml_string(request.api_key)}",
             "environment:", f"  cwd: {yaml_string(request.workdir)}"]
    return "\n".join(lines) + "\n"


def mini_swe_agent(spec: AgentSpec, request: AgentRequest, *, textbased: bool = True) -> AgentInvocation:
    """mini-swe-agent as its pinned version takes it: 1.x (`mini_v1`), or 2.x with the text-based action
    format (```mswea_bash_command blocks: any chat model) unless `textbased` is False (tool calls).

    Raises:
        ConfigError: the request replays a run this agent cannot reproduce (`check_replay`).
    """
    check_replay(spec, request.recorded)
    if spec.version is not None and spec.version.major < 2:
        if not textbased:
            raise ConfigError(f"--agent {spec.label}: mini-swe-agent 1.x has text actions only (```bash blocks), "
                              f"no tool calls; use --agent mini-swe-agent=={spec.version}")
        return mini_v1(spec, request)
    builtin = "mini_textbased.yaml" if textbased else "mini.yaml"
    env = {**base_environment(request), **_MINI_ENV}
    argv = (spec.entry, "--yolo", "--exit-immediately", "-c", builtin, "-c", MINI_CONFIG, "-o", MINI_TRAJECTORY)
    return AgentInvocation(argv=argv, env=env, cwd=request.workdir, outputs=(MINI_TRAJECTORY,),
                           files={TASK_FILE: request.task, MINI_CONFIG: mini_config(request, textbased=textbased)})


def mini_v1(spec: AgentSpec, request: AgentRequest) -> AgentInvocation:
    """mini-swe-agent 1.x (read from its 1.15.0 release): `mini` reads ONE config file (nothing is merged
    over a built-in one), its local environment's settings under `env:` (not `environment:`), and its
    task only as an option, so a bash wrapper reads the task file into `--task=` (the harness's argv
    never holds the task, and its last newline is kept). Actions are ```bash blocks, commands run by
    `subprocess.run(shell=True)` (/bin/sh) in the work dir.

    A replay (`request.recorded`) gets the whole recorded agent section in its own config file
    (`mini_v1_replay_config`); any other run gets 1.x's own `mini.yaml`, the gateway's model by
    `--model=` and the endpoint from `OPENAI_BASE_URL` (1.x has no option for a step limit: the
    gateway's call budget is the limit).
    """
    files = {TASK_FILE: request.task}
    if request.recorded is not None:
        files[MINI_CONFIG] = mini_v1_replay_config(request, request.recorded)
        options: tuple[str, ...] = ("-c", MINI_CONFIG)
    else:
        options = ("-c", "mini.yaml", f"--model=openai/{request.model}", "--cost-limit=0")
    argv = ("/bin/bash", "-c", _MINI_V1_WRAPPER, "mini", spec.entry, "--yolo", "--exit-immediately",
            "-o", MINI_TRAJECTORY, *options)
    return AgentInvocation(argv=argv, env={**base_environment(request), **_MINI_ENV}, files=files,
                           cwd=request.workdir, outputs=(MINI_TRAJECTORY,))


def mini_v1_replay_config(request: AgentRequest, recorded: RecordedRun) -> str:
    """mini 1.x's whole config for replaying `recorded`: its agent section as recorded (yolo mode, no
    confirmation at the end, no cost limit: the gateway's model has no price; the request's step limit
    when it sets one), the gateway as a litellm model, and the local environment in the work dir with
    the recorded variables and timeout."""
    agent = {**recorded.agent, "mode": "yolo", "confirm_exit": False, "cost_limit": 0,
             **({"step_limit": request.step_limit} if request.step_limit else {})}
    model = {"model_name": f"openai/{request.model}", "model_class": "litellm", "cost_tracking": "ignore_errors",
             "model_kwargs": {"api_base": request.base_url, "api_key": request.api_key}}
    env = {"cwd": request.workdir, "env": dict(recorded.env), "timeout": recorded.timeout}
    return f"agent: {yaml_value(agent)}\nmodel: {yaml_value(model)}\nenv: {yaml_value(env)}\n"


def check_replay(spec: AgentSpec, recorded: RecordedRun | None) -> None:
    """Refuse a replay that `spec` cannot reproduce: a mini-swe-agent recording made by another major
    version (their config shapes and action fences differ), or one replayed with tool calls. Other
    agents are served the recorded messages as they are.

    Raises:
        ConfigError: naming the recording's version and the `--agent` that replays it.
    """
    if recorded is None or spec.install_name != "mini-swe-agent" or spec.version is None:
        return
    if spec.name != "mini-swe-agent" or recorded.major != spec.version.major:
        raise ConfigError(f"--agent {spec.label} cannot replay this recording: it was made by mini-swe-agent "
                          f"{recorded.version} (text actions, {recorded.major}.x's config), and only the same "
                          f"major version with text actions reproduces it command for command; use --agent "
                          f"mini-swe-agent=={recorded.version}")


def mini_swe_agent_tools(spec: AgentSpec, request: AgentRequest) -> AgentInvocation:
    """mini with its tool-call action format (mini.yaml: the endpoint must support `tools`)."""
    return mini_swe_agent(spec, request, textbased=False)


def aider(spec: AgentSpec, request: AgentRequest) -> AgentInvocation:
    """aider on one message (the task file), applying its edits without asking and without committing."""
    model = f"openai/{request.model}"
    metadata = {model: {"max_input_tokens": AIDER_CONTEXT, "max_output_tokens": 8192, "input_cost_per_token": 0,
                        "output_cost_per_token": 0, "litellm_provider": "openai", "mode": "chat"}}
    flags = (f"--model={model}", f"--openai-api-base={request.base_url}", f"--openai-api-key={request.api_key}",
             f"--message-file={TASK_FILE}", "--yes-always", "--no-auto-commits", "--no-dirty-commits",
             "--no-stream", "--no-pretty", "--no-fancy-input", "--no-check-update", "--no-analytics",
             "--no-show-release-notes", "--no-show-model-warnings", "--no-gitignore", "--no-detect-urls",
             "--no-suggest-shell-commands", "--disable-playwright", "--edit-format=diff",
             f"--model-metadata-file={AIDER_METADATA}", f"--config={AIDER_CONFIG}", "--env-file=/dev/null",
             f"--chat-history-file={AIDER_CHAT_HISTORY}", f"--input-history-file={RUN_DIR}/aider.input.history",
             f"--llm-history-file={AIDER_LLM_HISTORY}")
    files = {TASK_FILE: request.task, AIDER_METADATA: json.dumps(metadata) + "\n",
             AIDER_CONFIG: "# the only configuration aider reads: the project's .aider.conf.yml is not\n{}\n"}
    return AgentInvocation(argv=("/bin/bash", "-c", _AIDER_WRAPPER, "aider", spec.entry, *flags),
                           env=base_environment(request), files=files, cwd=request.workdir,
                           outputs=(AIDER_CHAT_HISTORY, AIDER_LLM_HISTORY))


def tiny_agent(spec: AgentSpec, request: AgentRequest) -> AgentInvocation:
    """The example agent that ships in the package (harness/data/agents/tiny_agent.py), written next to the
    task and run with the image's own python3 (standard library only)."""
    source = (resources.files("harness") / "data" / "agents" / "tiny_agent.py").read_text(encoding="utf-8")
    return AgentInvocation(argv=("/usr/bin/python3", "-I", TINY_AGENT), env=base_environment(request),
                           files={TASK_FILE: request.task, TINY_AGENT: source}, cwd=request.workdir)


def shell_command(spec: AgentSpec, request: AgentRequest) -> AgentInvocation:
    """The operator's command, run by bash in the work dir; the task is in $HARNESS_TASK_FILE."""
    return AgentInvocation(argv=("/bin/bash", "-c", spec.command), env=base_environment(request),
                           files={TASK_FILE: request.task}, cwd=request.workdir)
