"""`harness sandbox prune` removes images the present sources no longer use, and only those."""

from __future__ import annotations

import json
import subprocess
import tempfile
import uuid
from pathlib import Path

from sandbox.images import BASE_LABEL, build_context, prune, stale_images

REPO = Path(__file__).resolve().parents[2]


def _derived(client, base: str, recorded_base: str) -> str:
    tag = f"harness-prune-test:{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as ctx:
        (Path(ctx) / "Dockerfile").write_text(f"FROM {base}\nLABEL harness.prune-test=1\n")
        build_context(client, Path(ctx), tag, labels={BASE_LABEL: recorded_base})
    return tag


def test_prune_removes_images_built_on_a_stale_sandbox_image_and_keeps_current_ones(docker_client,
                                                                                    sandbox_image: str) -> None:
    stale = _derived(docker_client, sandbox_image, "harness-sandbox:py3.11-debootstrap-000000000000")
    fresh = _derived(docker_client, sandbox_image, sandbox_image)   # positive control: built on the current one
    try:
        names = [name for _, name in stale_images(docker_client)]
        assert stale in names and fresh not in names and sandbox_image not in names
        listed = json.loads(subprocess.run([str(REPO / ".venv/bin/harness"), "sandbox", "prune", "--dry-run",
                                            "--json"], capture_output=True, text=True, check=True).stdout)
        assert stale in listed["removed"] and listed["dry_run"] is True
        assert docker_client.images.get(stale)   # a dry run removes nothing
        # only this test's images: another checkout on this machine may be using sandbox images that
        # this checkout's sources call stale (its tests would lose their image mid-run)
        removed, _ = prune(docker_client, label="harness.prune-test=1")
        assert removed == [stale]
        assert [i for i in docker_client.images.list(name="harness-prune-test") if stale in i.tags] == []
        assert docker_client.images.get(fresh) and docker_client.images.get(sandbox_image)
    finally:
        for tag in (stale, fresh):
            try:
                docker_client.images.remove(tag)
            except Exception:  # noqa: BLE001 - already removed by prune
                pass
