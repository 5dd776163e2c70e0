"""Print the cost of the agent images: the first and second `ensure_agent_image` call and the size added.

    PYTHONPATH=. python -m tests.external.measure [NAME ...]     (default: mini-swe-agent aider)

The first call builds only when the image is missing (remove it with `docker rmi` to measure a build;
the resolution and the wheels stay cached on the host, so that measures the image build alone).
"""

from __future__ import annotations

import sys
import time

import docker

from harness.external import ensure_agent_image, parse_agent
from sandbox.images import ensure_image


def main(names: list[str]) -> None:
    client = docker.from_env()
    base = ensure_image(python="3.11")
    base_size = client.images.get(base).attrs["Size"]
    for name in names or ["mini-swe-agent", "aider"]:
        started = time.monotonic()
        tag = ensure_agent_image(base, parse_agent(name))
        first = time.monotonic() - started
        started = time.monotonic()
        ensure_agent_image(base, parse_agent(name))
        second = time.monotonic() - started
        added = client.images.get(tag).attrs["Size"] - base_size
        print(f"{name}: {tag} first call {first:.1f}s, second call {second * 1000:.0f}ms, "
              f"{added / 1e6:.0f} MB added to {base}")


if __name__ == "__main__":
    main(sys.argv[1:])
