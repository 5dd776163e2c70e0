"""How each agent of the catalogue is started on a request: its argv, environment and files.

Every agent gets `base_environment`: the gateway as its OpenAI and Anthropic endpoint with a dummy
key, the gateway as its HTTP(S) proxy too (it answers anything but a model request with 403, so a
tool that tries the network fails at once instead of waiting on a dead route), and the switches that
keep litellm, pip and the Hugging Face hub from trying. The task text is written to TASK_FILE.

    mini_swe_agent(spec, request)   mini --yolo --exit-immediately, its settings in a YAML file
    aider(spec, request)            aider --message-file, its settings as --flag=value pairs
    tiny_agent(spec, request)       the example agent of the package, with the image's python3
    shell_command(spec, request)    the operator's `cmd:` command, run with bash
"""

from __future__ import annotations

import json
from importlib import resources

from harness.external.spec import RUN_DIR, TASK_FILE, AgentInvocation, AgentRequest, AgentSpec

MINI_CONFIG = f"{RUN_DIR}/mini-run.yaml"
MINI_TRAJECTORY = f"{RUN_DIR}/mini.traj.json"
TINY_AGENT = f"{RUN_DIR}/tiny_agent.py"
AIDER_CONFIG = f"{RUN_DIR}/aider.conf.yml"
AIDER_METADATA = f"{RUN_DIR}/aider-model.json"
AIDER_CHAT_HISTORY = f"{RUN_DIR}/aider.chat.history.md"
AIDER_LLM_HISTORY = f"{RUN_DIR}/aider.llm.history"
AIDER_CONTEXT = 128_000   # the context window aider is told (it knows no size for a gateway's model)
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
    """mini with the text-based action format (```mswea_bash_command blocks: any chat model)."""
    builtin = "mini_textbased.yaml" if textbased else "mini.yaml"
    env = {**base_environment(request), "MSWEA_CONFIGURED": "true", "MSWEA_SILENT_STARTUP": "1",
           "MSWEA_GLOBAL_CONFIG_DIR": f"{RUN_DIR}/mini-config", "MSWEA_COST_TRACKING": "ignore_errors",
           "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "3"}
    argv = (spec.entry, "--yolo", "--exit-immediately", "-c", builtin, "-c", MINI_CONFIG, "-o", MINI_TRAJECTORY)
    return AgentInvocation(argv=argv, env=env, cwd=request.workdir, outputs=(MINI_TRAJECTORY,),
                           files={TASK_FILE: request.task, MINI_CONFIG: mini_config(request, textbased=textbased)})


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
