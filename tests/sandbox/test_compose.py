"""docker-compose.yml describes the sandbox with the same hardening and limits as the code."""

from __future__ import annotations

import re
from pathlib import Path

from sandbox.api import AGENT_UID, Limits, SandboxSpec
from sandbox.docker_sandbox import container_options

COMPOSE = (Path(__file__).resolve().parents[2] / "docker-compose.yml").read_text()


def _service_line(key: str) -> str:
    m = re.search(rf"^\s+{re.escape(key)}:\s*(.+?)\s*(#.*)?$", COMPOSE, re.MULTILINE)
    assert m, f"docker-compose.yml has no `{key}:` line"
    return m.group(1)


def test_compose_matches_the_hardening_of_container_options() -> None:
    opts = container_options(SandboxSpec(image="x", session="s"))
    assert _service_line("network_mode") == opts["network_mode"] == "none"
    assert _service_line("dns") == "[127.0.0.1]" and opts["dns"] == ["127.0.0.1"]
    assert _service_line("dns_search") == "[.]" and opts["dns_search"] == ["."]
    # compose runs an operator's shell as the main process, so as the agent; the code runs its idle
    # main process as nobody and the agent's commands through `docker exec -u agent`
    assert _service_line("user") == f'"{AGENT_UID}:{AGENT_UID}"' and opts["user"] == "65534:65534"
    assert _service_line("cap_drop") == "[ALL]" and opts["cap_drop"] == ["ALL"]
    assert _service_line("security_opt") == "[no-new-privileges:true]"
    assert _service_line("read_only") == "true" and opts["read_only"] is True
    assert _service_line("init") == "true" and opts["init"] is True
    assert _service_line("ipc") == opts["ipc_mode"]


def test_compose_matches_the_default_limits() -> None:
    lim = Limits()
    assert _service_line("pids_limit") == str(lim.pids)
    assert _service_line("mem_limit") == _service_line("memswap_limit") == lim.memory
    assert float(_service_line("cpus")) == lim.cpus
    assert _service_line("fsize") == str(lim.file_size)
    assert _service_line("nofile") == f"{{soft: {lim.open_files}, hard: {lim.open_files}}}"
    assert f"max-size: {lim.log_size}" in COMPOSE
    mounts = container_options(SandboxSpec(image="x", session="s"))["tmpfs"]
    assert sorted(mounts) == ["/home/agent", "/tmp", "/workspace"]
    for mount, size in (("/workspace", lim.workspace_size), ("/tmp", lim.tmp_size), ("/home/agent", lim.home_size)):
        assert mounts[mount].endswith(f",size={size}") and ",exec,nosuid,nodev," in mounts[mount]
        assert f"- {mount}:{mounts[mount]}" in COMPOSE, mount      # the very options the code asks for
