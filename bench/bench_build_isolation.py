"""What leaving out pip's isolated build environment saves in an instance build, on real rows.

The instance build (`container_scripts/instance_build.py`) runs the recipe's install with
`PIP_NO_BUILD_ISOLATION=0` when pip's isolated build environment would hold exactly what the venv
holds (every build requirement and its requirements at the newest version the wheelhouse has). This
builds the instance layer of each given row twice per round, alternately, once as the recipe says
(isolated) and once as the build decides, on the row's own environment image (built first if missing),
and prints the install step's and the whole build's durations (medians) and their ratio. The layers
are loaded under throwaway tags and removed.

    .venv/bin/python bench/bench_build_isolation.py --instances FILE --repos DIR --ids django__django-15789 \
        [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import docker  # noqa: E402

from harness.config import Config  # noqa: E402
from harness.container_scripts import script_text  # noqa: E402
from harness.environments import sandbox_image  # noqa: E402
from harness.environments.declarations import project_name  # noqa: E402
from harness.environments.instance_layer import BUILD_SCRIPT, build_instance  # noqa: E402
from harness.environments.recipe import INSTANCE_BUILD, venv_link_files  # noqa: E402
from harness.environments.standin import standin_files  # noqa: E402
from harness.environments.venv_image import ensure_venv_image  # noqa: E402
from harness.evaluation.instance_files import load_instances  # noqa: E402

LABELS = {"harness.bench": "build-isolation"}


def timing(output: str, step: str) -> float:
    found = re.search(rf"\b{step} ([\d.]+)s", output)
    if found is None:
        raise SystemExit(f"no '{step}' time in the build's output:\n{output[-2000:]}")
    return float(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=Path, required=True, help="SWE-bench rows (JSONL)")
    parser.add_argument("--repos", type=Path, required=True, help="clones <owner>__<name> or tarballs")
    parser.add_argument("--ids", nargs="+", required=True, help="instance ids")
    parser.add_argument("--rounds", type=int, default=2, help="builds of each kind per instance (default 2)")
    args = parser.parse_args()
    client = docker.from_env()
    config = Config()
    figures: dict[str, dict[str, list[float]]] = {"recipe": {"install": [], "build": []},
                                                  "decided": {"install": [], "build": []}}
    for task in load_instances(args.instances, args.repos, args.ids):
        assert task.environment is not None
        base = sandbox_image(config, task.python, progress=print, task=task)
        env_tag = ensure_venv_image(task, base, client=client, progress=print)
        env = task.environment
        for round_ in range(args.rounds):
            for kind in ("recipe", "decided"):
                settings = {"installed": bool(task.install_cmd), "project": project_name(task.repo_dir) or "",
                            "scm_version": "0.0.0", "keep_build_isolation": kind == "recipe"}
                scripts = {BUILD_SCRIPT: script_text(INSTANCE_BUILD),
                           "pre-install.sh": "".join(c + "\n" for c in env.pre_install),
                           "install.sh": task.install_cmd + "\n", "settings.json": json.dumps(settings)}
                tag = f"harness-bench:isolation-{uuid.uuid4().hex[:8]}"
                try:
                    output = build_instance(client, env_tag, tag, task.repo_dir, scripts, dict(env.test_env), LABELS,
                                            system_files={**venv_link_files(task.python),
                                                          **standin_files(env.python_requested, task.python)})
                finally:
                    try:
                        client.images.remove(tag, force=True)
                    except docker.errors.ImageNotFound:
                        pass
                said = next(line for line in output.splitlines() if line.startswith("build isolation:"))
                install, build = timing(output, "install"), timing(output, "build script")
                figures[kind]["install"].append(install)
                figures[kind]["build"].append(build)
                print(f"{task.id} round {round_ + 1} {kind}: install {install:.1f}s, build script {build:.1f}s; {said}")
    for step in ("install", "build"):
        recipe, decided = (statistics.median(figures[k][step]) for k in ("recipe", "decided"))
        print(f"{step}: as the recipe says (isolated) median {recipe:.1f}s, as decided median {decided:.1f}s, "
              f"ratio {decided / recipe:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
