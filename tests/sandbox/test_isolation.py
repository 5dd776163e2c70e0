"""Nothing of the host is inside the sandbox, and nothing inside can gain privileges or alter the image."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from sandbox.api import SandboxSpec
from sandbox.deployment.docker import LINK_DIR
from sandbox.docker_sandbox import DockerSandbox, container_options
from tests.sandbox.conftest import make_spec, probe_json

CANARY = "HARNESS_CANARY_SECRET"


def test_host_environment_variables_and_secrets_do_not_reach_the_sandbox(sandbox_image: str,
                                                                         monkeypatch) -> None:  # type: ignore[no-untyped-def]
    value = "canary-7f3a9c"
    monkeypatch.setenv(CANARY, value)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-canary")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    with DockerSandbox(make_spec(sandbox_image)) as box:
        seen = box.exec("env; cat /proc/1/environ /proc/$PPID/environ | tr '\\0' '\\n'", timeout=10).stdout.text
        grep = box.exec(f"grep -rls {value} /etc /home /tmp /workspace /opt; "
                       "grep -c '^agent:' /etc/passwd", timeout=10).stdout.text
    assert "PATH=/usr/local/sbin" in seen          # positive control: the sandbox's own variables are there
    for leaked in (value, "sk-ant-canary", "proxy.invalid", CANARY, "ANTHROPIC", "PROXY"):
        assert leaked not in seen
    assert grep.strip() == "1"                     # no file holds the canary; the search itself works


def test_no_docker_socket_inside(shared_box: DockerSandbox) -> None:
    got = probe_json(shared_box, """
        import json, os, subprocess
        found = subprocess.run("find / \\\\( -path /proc -o -path /sys \\\\) -prune -o -type s -print 2>/dev/null",
                               shell=True, capture_output=True, text=True).stdout.split()
        sockets = [p for p in ("/var/run/docker.sock", "/run/docker.sock") if os.path.exists(p)]
        mounts = [l.split()[4] for l in open("/proc/self/mountinfo")]
        print(json.dumps({"found": found, "sockets": sockets, "mounts": mounts}))
    """)
    assert got["found"] == [] and got["sockets"] == []
    # what Docker mounts from the host: its init binary (init=True) and the channel's link folder, read-only
    # and empty once the channel is up (tests/sandbox/test_direct_channel.py); no socket, no other host folder
    from_host = [m for m in got["mounts"] if "docker" in m or m.startswith(("/var/run", "/run", "/opt"))]
    assert from_host == ["/usr/sbin/docker-init", LINK_DIR]
    assert "/workspace" in got["mounts"]          # positive control: the listing works


def test_workspace_is_a_tmpfs_copy_not_a_bind_mount_of_the_host(sandbox: DockerSandbox, project_dir: Path) -> None:
    mounts = sandbox.exec("grep ' /workspace ' /proc/self/mountinfo", timeout=10).stdout.text
    assert " - tmpfs " in mounts, mounts
    sandbox.exec("echo changed > README.md", timeout=10)
    assert (project_dir / "README.md").read_text() == "a small project\n"


def test_no_capabilities_and_no_new_privileges(shared_box: DockerSandbox) -> None:
    status = dict(line.split(":\t", 1) for line in
                  shared_box.exec("cat /proc/self/status", timeout=10).stdout.text.splitlines() if ":\t" in line)
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert status[cap].strip() == "0000000000000000", (cap, status[cap])
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Uid"].split()[:2] == ["1000", "1000"]


def test_setuid_binaries_do_not_raise_privileges(shared_box: DockerSandbox) -> None:
    setuid = shared_box.exec("find / -xdev -perm -4000 -type f 2>/dev/null", timeout=20).stdout.text.split()
    assert "/usr/bin/su" in setuid                # the image has setuid binaries; they must not work
    su = shared_box.exec("su -c id root; echo rc=$?", timeout=10)
    assert "uid=0" not in su.stdout.text and "rc=1" in su.stdout.text, su
    assert shared_box.exec("id -u", timeout=10).stdout.text.strip() == "1000"


def test_root_filesystem_is_read_only_and_workspace_is_writable(shared_box: DockerSandbox) -> None:
    got = probe_json(shared_box, """
        import json
        out = {}
        for path in ("/etc/harness-probe", "/usr/local/bin/x", "/opt/harness/channel/__main__.py",
                     "/workspace/probe.txt", "/tmp/probe.txt", "/home/agent/probe.txt"):
            try:
                with open(path, "w") as f:
                    f.write("x")
                out[path] = 0
            except OSError as exc:
                out[path] = exc.errno
        print(json.dumps(out))
    """)
    assert got["/etc/harness-probe"] == errno.EROFS
    assert got["/usr/local/bin/x"] == errno.EROFS
    assert got["/opt/harness/channel/__main__.py"] in (errno.EROFS, errno.EACCES)
    assert got["/workspace/probe.txt"] == 0
    assert got["/tmp/probe.txt"] == 0
    assert got["/home/agent/probe.txt"] == 0


def test_writable_mounts_refuse_setuid_and_devices(shared_box: DockerSandbox) -> None:
    options = shared_box.exec("grep -E ' (/workspace|/tmp|/home/agent) ' /proc/self/mounts", timeout=10).stdout.text
    lines = options.strip().splitlines()
    assert len(lines) == 3, options
    for line in lines:
        assert "nosuid" in line and "nodev" in line, line
    mknod = shared_box.exec("mknod /tmp/dev c 1 3; echo rc=$?", timeout=10)
    assert "Operation not permitted" in mknod.stderr.text and "rc=1" in mknod.stdout.text


def test_container_options_carry_every_hardening_setting(sandbox_image: str) -> None:
    opts = container_options(SandboxSpec(image=sandbox_image, session="s"))
    assert opts["network_mode"] == "none" and opts["cap_drop"] == ["ALL"]
    assert opts["security_opt"] == ["no-new-privileges"] and opts["read_only"] is True
    assert opts["user"] == "65534:65534" and opts["init"] is True      # the idle main process: nobody
    assert opts["mem_limit"] == opts["memswap_limit"] == "2g"
    assert opts["pids_limit"] == 256 and opts["nano_cpus"] == 1_000_000_000
    assert opts["use_config_proxy"] is False
    assert opts["labels"]["harness.managed"] == "true" and opts["labels"]["harness.pid"] == str(os.getpid())


def test_the_running_container_has_the_hardening_applied(shared_box: DockerSandbox) -> None:
    shared_box.container.reload()
    host = shared_box.container.attrs["HostConfig"]
    assert host["NetworkMode"] == "none" and host["CapDrop"] == ["ALL"] and host["ReadonlyRootfs"] is True
    assert host["SecurityOpt"] == ["no-new-privileges"] and host["Init"] is True
    assert host["Memory"] == host["MemorySwap"] == 2 * 1024 ** 3 and host["PidsLimit"] == 256
    assert host["Privileged"] is False and not host["Binds"] and not host["Devices"]
    assert {u["Name"] for u in host["Ulimits"]} == {"fsize", "nofile"}
    assert host["LogConfig"]["Config"] == {"max-file": "1", "max-size": "1m"}
