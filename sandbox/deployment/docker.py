"""A Docker sandbox's container life: its hardened options, start, stop, alive, labels and reaping.

What runs inside the container (commands, files, archives) is the runtime's job
(`sandbox/runtime/channel.py`); this module only makes, watches and removes the container, and opens
an exec channel into it. All hardening is in `container_options()`, and every container the harness
starts is made here, with it (tests/test_container_creation.py holds that).
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests
from docker.types import LogConfig, Mount, Ulimit

from sandbox.api import AGENT_UID, WORKDIR, Limits, SandboxSpec
from sandbox.deployment.lifeline import UNTIED_COMMAND, Lifeline, start_tied
from sandbox.docker_client import client_or_default
from sandbox.errors import ImageError, SandboxError, SandboxUnavailable
from sandbox.host_channel import Channel
from sandbox.reaper import links_root, owner_labels, reap

# SHELL and HOME set spare every bash start a passwd lookup (nsswitch.conf, /etc/passwd: two file opens,
# each a round trip to the daemon under a FUSE storage driver)
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/home/agent",
            "USER": "agent", "SHELL": "/bin/bash", "LANG": "C.UTF-8", "TERM": "dumb", "PYTHONDONTWRITEBYTECODE": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "PIP_BREAK_SYSTEM_PACKAGES": "1",
            "GIT_TERMINAL_PROMPT": "0", "PAGER": "cat"}
IDLE_UID = 65534   # nobody: owns the container's main process, not the agent's files
LINK_DIR = "/opt/harness/link"   # where the channel's link folder appears in the container (read-only)
_reaped_this_process = False
_links_refused = ""   # why this process's daemon cannot mount link folders, once it said so


def _daemon_is_here(client: docker.DockerClient) -> bool:
    """Whether the daemon runs on this machine's kernel, behind a unix socket (so it can bind a host folder
    of ours): not a tcp or ssh daemon, not Docker Desktop's virtual machine on macOS or Windows."""
    return sys.platform.startswith("linux") and str(client.api.base_url) == "http+docker://localhost"


def make_link_folder(name: str) -> Path:
    """A new empty folder for one sandbox's channel link, named after this process so that the reaper
    (`sandbox.reaper`) can tell a dead owner's. Mode 0711: the container's user may reach a socket in
    it, not list it or write to it (it is mounted read-only besides)."""
    root = links_root()
    root.mkdir(mode=0o755, exist_ok=True)
    st = root.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise SandboxError(f"{root} is not a folder of ours (a link, another user's, or writable by others); "
                           "remove it")
    folder = root / f"{os.getpid()}-{name}"
    folder.mkdir(mode=0o711)
    os.chmod(folder, 0o711)   # whatever the umask
    return folder


# The one capability a container ever gets, and only a layer build's (`container_options(layer_build=True)`):
# the layer script, run as root, reads every file the build's user wrote (one of mode 0600 included)
# to put it in the layer. The build's own processes run as the agent, without it.
LAYER_BUILD_CAPABILITY = "DAC_READ_SEARCH"


def container_options(spec: SandboxSpec, *, layer_build: bool = False) -> dict[str, Any]:
    """The hardening of every container the harness starts, as `docker.containers.run` keyword arguments.

    `layer_build`: the container builds an image layer out of the changes to its own filesystem (the
    instance build of `harness.environments.instance_layer`), which changes three settings, each
    commented where it is set: a writable root, LAYER_BUILD_CAPABILITY, and the image's own environment.
    Everything else is the sandbox's.
    """
    lim: Limits = spec.limits
    # Docker mounts a tmpfs `noexec,nosuid,nodev` unless told otherwise; `exec` lifts only the first.
    # The agent's project must run as its own CI runs it: `./run.sh`, django's `./tests/runtests.py`,
    # sympy's `bin/test`, and C extensions built in place (mmap with PROT_EXEC fails on noexec).
    # /home/agent is exec too: pip, finding site-packages read-only, falls back to `--user` and installs
    # into ~/.local, whose bin/ scripts and compiled extensions must run and load. noexec would bound
    # nothing: the agent already runs any code it likes through python3 or bash. The boundaries are
    # the non-root user, no capabilities, no-new-privileges, and on every writable mount `nosuid` (a
    # setuid-root file there runs with the caller's ids) and `nodev` (a device node there cannot be opened).
    tmpfs_opts = f"rw,exec,nosuid,nodev,uid={AGENT_UID},gid={AGENT_UID},mode=0755"
    options: dict[str, Any] = {
        "network_mode": "none",                       # no interface but loopback: nothing leaves
        "dns": ["127.0.0.1"], "dns_search": ["."],    # the host's resolver and search domains stay out
        # pid 1 and the idle main process run as `nobody`, never root; the channel and every command
        # run as the agent (exec user), who can therefore not signal them to stop the container
        "user": f"{IDLE_UID}:{IDLE_UID}",
        "cap_drop": ["ALL"],                          # no capabilities, even for setuid binaries
        "security_opt": ["no-new-privileges"],        # setuid/setcap cannot raise privileges
        "read_only": True,                            # the image cannot be altered
        "tmpfs": {WORKDIR: f"{tmpfs_opts},size={lim.workspace_size}",
                  "/tmp": f"{tmpfs_opts},size={lim.tmp_size}",
                  "/home/agent": f"{tmpfs_opts},size={lim.home_size}"},
        "pids_limit": lim.pids,                       # fork bombs stop here
        "mem_limit": lim.memory,
        "memswap_limit": lim.memory,                  # equal to memory: no swap
        "nano_cpus": int(lim.cpus * 1e9),
        "init": True,                                 # reaps zombies, forwards signals
        "ulimits": [Ulimit(name="fsize", soft=lim.file_size, hard=lim.file_size),
                    Ulimit(name="nofile", soft=lim.open_files, hard=lim.open_files)],
        "log_config": LogConfig(type=LogConfig.types.JSON, config={"max-size": lim.log_size, "max-file": "1"}),
        "ipc_mode": "private",
        "hostname": "sandbox",
        "environment": dict(BASE_ENV),                # nothing of the host's environment
        "use_config_proxy": False,                    # no proxy settings from the docker client config
        "labels": {**owner_labels(spec.session), "harness.kind": "sandbox", **spec.labels},
        "name": f"harness-{spec.session}-{uuid.uuid4().hex[:6]}",
    }
    if layer_build:
        # its writes to the image's own filesystem are the layer being built; no sandbox ever runs on
        # them as they are: the host loads what the layer script collected as a new image
        options["read_only"] = False
        options["cap_add"] = [LAYER_BUILD_CAPABILITY]
        # the recipe's install runs with the environment the image's Dockerfile set (its venv first on
        # PATH, pip offline), as the official harness runs it; nothing of the host's is in either
        del options["environment"]
    return options


class DockerDeployment:
    """One sandbox container: started idle under Docker's init, on its lifeline (it ends with this process),
    removed by `stop()`."""

    def __init__(self, spec: SandboxSpec, client: docker.DockerClient | None = None, *,
                 layer_build: bool = False) -> None:
        self.spec = spec
        self.client = client
        self.layer_build = layer_build   # a layer build's container (`container_options`), not a sandbox
        self.container: Any = None
        self.link: Path | None = None   # the host end of the channel's link folder, when mounted
        self.link_refused = ""          # why there is none, when one was wanted
        # the container ends with this process (`sandbox.deployment.lifeline`); False: it idles until
        # removed (what a benchmark compares against)
        self.tied = True
        self.lifeline: Lifeline | None = None
        self.started_at = 0.0   # time.time() at the start, where its events begin

    def start(self) -> None:
        """Create and start the container; the first start in a process reaps leftovers of dead ones.

        Raises:
            DockerUnavailable: no Docker daemon answers.
            ImageError: the sandbox image does not exist.
            SandboxError: it is already started.
        """
        global _reaped_this_process, _links_refused
        if self.container is not None:
            raise SandboxError(f"sandbox {self.spec.session!r} is already started; use it, or close() it first")
        self.client = client_or_default(self.client)
        self.started_at = time.time()
        if not _reaped_this_process:
            reap(self.client)
            _reaped_this_process = True
        try:
            self.client.images.get(self.spec.image)
        except docker.errors.ImageNotFound as exc:
            raise ImageError(f"sandbox image {self.spec.image!r} does not exist; build it with "
                             "`harness sandbox build`") from exc
        options = container_options(self.spec, layer_build=self.layer_build)
        if self.spec.direct_channel and _links_refused:
            self.link_refused = f"the daemon cannot bind this machine's folders: {_links_refused}"
        elif self.spec.direct_channel and not _daemon_is_here(self.client):
            self.link_refused = f"the daemon is not on this machine ({self.client.api.base_url})"
        elif self.spec.direct_channel:
            try:
                self.link = make_link_folder(options["name"])
            except (OSError, SandboxError) as exc:
                self.link_refused = f"no link folder: {exc}"
        mounts = [Mount(target=LINK_DIR, source=str(self.link), type="bind", read_only=True)] if self.link else []
        try:
            self._run(self.client, options, mounts)
        except docker.errors.APIError as exc:
            self._remove_link()
            if not mounts or "bind source path does not exist" not in str(exc):
                raise
            # a daemon that does not see this machine's folders (the harness runs in a container beside
            # it): this sandbox and every later one of this process keep to the exec stream
            _links_refused = str(exc)
            self.link_refused = f"the daemon cannot bind this machine's folders: {exc}"
            options["name"] = f"{options['name']}-x"
            self._run(self.client, options, [])

    def _run(self, client: docker.DockerClient, options: dict[str, Any], mounts: list[Mount]) -> None:
        """Create and start the container: tied to this process by its lifeline (`sandbox.deployment.lifeline`),
        or, with `tied` false, idle on `sleep infinity` until `stop()` or a reaper removes it."""
        if self.tied:
            self.container, self.lifeline = start_tied(client, self.spec.image, mounts=mounts, **options)
        else:
            self.container = client.containers.run(self.spec.image, UNTIED_COMMAND, detach=True, mounts=mounts,
                                                    **options)

    def _remove_link(self) -> None:
        if self.link is not None:
            shutil.rmtree(self.link, ignore_errors=True)
            self.link = None

    def stop(self) -> None:
        """Remove the container (its tmpfs mounts go with it). Idempotent; a removal under way elsewhere is fine."""
        if self.container is None:
            self._remove_link()
            return
        try:
            self.container.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass   # auto-removed already (it stopped), or a reaper's
        except docker.errors.APIError as exc:
            if exc.status_code != 409:   # 409: its auto-removal or a reaper is already removing it
                raise
            self._wait_removed()
        self.container = None
        if self.lifeline is not None:
            self.lifeline.close()
            self.lifeline = None
        self._remove_link()

    def _wait_removed(self) -> None:
        """Wait (30 s at most) until a removal under way elsewhere has removed the container."""
        try:
            self.container.wait(condition="removed", timeout=30)
        except docker.errors.NotFound:
            pass   # removed already
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            raise SandboxError(f"the container {self.container.name} was being removed and is still there after "
                               f"30 s ({exc}); `harness sandbox reap` removes it") from exc

    def death(self) -> str:
        """What Docker says of a container that stopped or vanished: OOMKilled, its exit code, the signal a
        kill sent, its error and the last lines of its log; "" while it runs. An auto-removed container is
        gone: its story comes from the daemon's recent events."""
        if self.container is None or self.client is None:
            return "the sandbox was closed"
        try:
            state = self.client.api.inspect_container(self.container.id)["State"]
        except docker.errors.NotFound:
            return self._events_story(self.client, self.container.id) or "the container was removed"
        if state.get("Running") and not state.get("Paused") and not state.get("Restarting"):
            return ""
        story = self._events_story(self.client, self.container.id)
        said = ["OOMKilled"] if state.get("OOMKilled") and "OOMKilled" not in story else []
        said.append(story or f"{state.get('Status', '?')}, exit code {state.get('ExitCode', '?')}")
        if state.get("Error"):
            said.append(f"error: {state['Error']}")
        try:
            logs = self.container.logs(tail=5).decode("utf-8", "replace").strip()
        except docker.errors.APIError:
            logs = ""   # being auto-removed (409) or removed (404) meanwhile: its log went with it
        return "; ".join(said + ([f"last log lines: {logs}"] if logs else []))

    def _events_story(self, client: docker.DockerClient, container_id: str) -> str:
        """The container's oom, kill, die and destroy events since its start, as the daemon still holds them."""
        seen: list[str] = []
        try:
            for event in client.api.events(since=int(self.started_at) - 1, until=int(time.time()) + 1,
                                           filters={"container": container_id}, decode=True):
                action, attributes = event.get("Action", ""), (event.get("Actor") or {}).get("Attributes") or {}
                if action == "oom":
                    seen.append("OOMKilled (the memory limit was hit)")
                elif action == "kill":
                    seen.append(f"killed from outside (signal {attributes.get('signal', '?')})")
                elif action == "die":
                    seen.append(f"exit code {attributes.get('exitCode', '?')}")
                elif action == "destroy":
                    seen.append("removed")
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            return f"(its events could not be read: {exc})"
        return ", ".join(dict.fromkeys(seen))

    def alive(self) -> bool:
        """Whether the container exists and runs (asks the daemon)."""
        if self.container is None:
            return False
        try:
            self.container.reload()
        except docker.errors.NotFound:
            return False
        return bool(self.container.status == "running")

    def open_channel(self, env: dict[str, str]) -> Channel:
        """Start an exec channel server in the container, as the agent, with exactly `env`.

        Raises:
            SandboxError: the container is not started.
            SandboxUnavailable: it stopped or is gone (Docker's reason said).
            ChannelError: the server did not start.
        """
        if self.client is None or self.container is None:
            raise SandboxError("the sandbox is closed; start a new one")
        if not self.alive():
            raise SandboxUnavailable(self.death())
        link = (str(self.link), LINK_DIR) if self.link is not None else None
        channel = Channel(self.client, self.container.id, f"{AGENT_UID}:{AGENT_UID}", env, link)
        if self.link_refused:
            channel.link_refused = self.link_refused
        return channel
