"""`harness sandbox prune` removes images the present sources no longer use, and only those."""

from __future__ import annotations

import json
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from sandbox.errors import ImageError
from sandbox.images import (
    BASE_LABEL,
    base_tag,
    build_context,
    current_tags,
    extra_packages,
    image_tag,
    prune,
    stale_images,
)

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


def test_a_variant_with_more_debian_packages_is_current_while_its_sources_stand() -> None:
    packages = ("build-essential", "pkg-config", "python3-dev")
    variant = image_tag("3.9", "debootstrap", packages)
    assert "-plus-" in variant and variant != image_tag("3.9", "debootstrap")
    assert variant not in current_tags()                      # unknown until an image carries its labels
    assert variant in current_tags([("3.9", " ".join(packages))])
    assert base_tag("bullseye", packages) in current_tags([("3.9", " ".join(packages))])
    assert image_tag("3.9", "debootstrap", packages[:2]) not in current_tags([("3.9", " ".join(packages))])


def test_package_names_that_could_become_options_are_refused() -> None:
    assert extra_packages(["python3-dev", "g++", "git", "python3-dev"]) == ("g++", "python3-dev")  # git: already in
    for bad in ("--allow-unauthenticated", "-o=APT::X", "pkg;rm -rf /", "Foo", ""):
        with pytest.raises(ImageError, match="Debian package name"):
            extra_packages([bad])
