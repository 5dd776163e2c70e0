"""A sandbox owner for the lifeline tests: a real process that starts sandboxes, then obeys its stdin.

    python tests/sandbox/owner_process.py IMAGE MODE

MODE: `box` (one DockerSandbox), `untied` (one started without its lifeline, as an older harness did),
`pool` (a SandboxPool of 2 blanks), `child` (one box, and a `sleep 300` child started with
close_fds=False that outlives this process). It prints one JSON line {"containers": [...],
"pid": ..., "child": ...}, then for each line read: `exec` runs `echo alive` in the first box and
prints its output; `close` closes everything and prints "closed"; `crash` raises (the interpreter
exits with an exception, nothing closed by hand).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sandbox.api import SandboxSpec  # noqa: E402
from sandbox.docker_sandbox import DockerSandbox  # noqa: E402
from sandbox.pool import SandboxPool  # noqa: E402


def spec(image: str) -> SandboxSpec:
    return SandboxSpec(image=image, session=f"owner-{uuid.uuid4().hex[:8]}", labels={"harness.test": "1"})


def main() -> int:
    image, mode = sys.argv[1], sys.argv[2]
    boxes: list[DockerSandbox] = []
    pool: SandboxPool | None = None
    child = 0
    if mode == "pool":
        pool = SandboxPool(size=2)
        shape = spec(image)
        pool.expect(shape, uses=2)
        while pool.ready(shape) < 2:   # the blanks start in the pool's threads
            time.sleep(0.05)
        names = [box.container.name for ready in pool._ready.values() for box in ready]
    else:
        box = DockerSandbox(spec(image))
        box.deployment.tied = mode != "untied"
        box.start()
        boxes.append(box)
        names = [box.container.name]
        if mode == "child":
            child = subprocess.Popen(["sleep", "300"], close_fds=False, start_new_session=True).pid
    print(json.dumps({"containers": names, "pid": os.getpid(), "child": child}), flush=True)
    for line in sys.stdin:
        if line.strip() == "exec":
            print(boxes[0].exec("echo alive", timeout=30).stdout.text.strip(), flush=True)
        elif line.strip() == "close":
            for box in boxes:
                box.close()
            if pool is not None:
                pool.close()
            print("closed", flush=True)
        elif line.strip() == "crash":
            raise RuntimeError("the owner crashes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
