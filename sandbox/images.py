"""Building the sandbox image, with or without a container registry.

Two ways, chosen automatically (`base="auto"`) or forced (`"registry"` / `"debootstrap"`):

- registry: `image/Dockerfile` on top of the official `python:X-slim` image (pulled if missing);
- debootstrap: a minimal Debian of the release that ships Python X is bootstrapped into a folder from
  the machine's configured apt mirror, `docker import`-ed as a base, and `image/Dockerfile.offline`
  is built on it with no network.

Images are tagged by a hash of everything that goes into them and labelled with it, so a build runs
only when its inputs change. Concurrent builders on one machine wait for each other (a file lock).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import docker
import docker.errors
from platformdirs import user_cache_dir

from sandbox.api import Progress, quiet
from sandbox.docker_client import client_or_default
from sandbox.errors import ImageError

CONTEXT_DIR = Path(__file__).parent   # the build context: the Dockerfiles and the channel server's files
IMAGE_DIR = CONTEXT_DIR / "image"
REPOSITORY = "harness-sandbox"
BASE_REPOSITORY = "harness-base"
HASH_LABEL = "harness.image.hash"
BASE_LABEL = "harness.base"   # on images built FROM a sandbox image: which one (prune removes them with it)
PYTHON_RELEASES = {"3.9": "bullseye", "3.11": "bookworm", "3.13": "trixie"}
DEBIAN_PACKAGES = ["python3", "python3-pip", "python3-venv", "python3-pytest", "python3-pyflakes",
                   "git", "procps", "ca-certificates", "patch", "less"]


def release_for(python: str) -> str:
    """The Debian release whose python3 is `python`."""
    if python not in PYTHON_RELEASES:
        raise ImageError(f"no Debian release ships Python {python!r} as python3; available offline: "
                         f"{', '.join(f'{v} ({r})' for v, r in PYTHON_RELEASES.items())}; "
                         "with a registry any python:X-slim tag works, e.g. --python 3.11")
    return PYTHON_RELEASES[python]


def apt_mirror(sources: Path = Path("/etc/apt")) -> str:
    """The Debian mirror this machine's apt is configured with (never a host written in the code)."""
    files = [sources / "sources.list", *sorted((sources / "sources.list.d").glob("*"))]
    for f in files:
        if not f.is_file():
            continue
        uris: list[str] = []
        suites: list[str] = []
        for raw in f.read_text(errors="replace").splitlines():
            line = raw.split("#", 1)[0].strip()
            if line.startswith("deb ") and "-security" not in line:
                parts = [p for p in line.split()[1:] if not p.startswith("[")]
                if len(parts) >= 2 and parts[1].split("-")[0] in {*PYTHON_RELEASES.values(), "stable"}:
                    return parts[0]
            elif line.startswith("URIs:"):
                uris = line.split()[1:]
            elif line.startswith("Suites:"):
                suites = line.split()[1:]
            if uris and suites:
                if any(s.split("-")[0] in PYTHON_RELEASES.values() for s in suites) and \
                        not any("security" in s for s in suites):
                    return uris[0]
                uris, suites = [], []
    raise ImageError(f"found no Debian mirror in {sources}/sources.list or sources.list.d; configure apt "
                     "(e.g. 'deb http://<your mirror>/debian bookworm main') or build with --base registry")


def server_files() -> list[Path]:
    """The files the image ships for the channel server: the protocol module and the server package."""
    return [CONTEXT_DIR / "_protocol.py", *sorted((CONTEXT_DIR / "server").glob("*.py"))]


def inputs_hash(python: str, mode: str) -> str:
    h = hashlib.sha256(f"{python}\n{mode}\n{' '.join(DEBIAN_PACKAGES)}\n".encode())
    for path in [IMAGE_DIR / ("Dockerfile" if mode == "registry" else "Dockerfile.offline"), *server_files()]:
        h.update(f"{path.relative_to(CONTEXT_DIR)}\n".encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def image_tag(python: str, mode: str) -> str:
    return f"{REPOSITORY}:py{python}-{mode}-{inputs_hash(python, mode)}"


def registry_reachable(client: docker.DockerClient, python: str) -> bool:
    base = f"python:{python}-slim"
    try:
        client.images.get(base)
        return True
    except docker.errors.ImageNotFound:
        pass
    try:
        client.images.pull(base)
        return True
    except docker.errors.APIError:
        return False


def ensure_image(python: str = "3.11", base: str = "auto", *, client: docker.DockerClient | None = None,
                 progress: Progress = quiet, force: bool = False) -> str:
    """The tag of an up-to-date sandbox image for `python`, building it if needed.

    Raises:
        ImageError: the build failed, or `python` cannot be had offline.
        DockerUnavailable: no Docker daemon.
    """
    client = client_or_default(client)
    if base not in ("auto", "registry", "debootstrap"):
        raise ImageError(f"--base must be auto, registry or debootstrap, got {base!r}; e.g. --base debootstrap")
    for mode in (("registry", "debootstrap") if base == "auto" else (base,)):
        tag = image_tag(python, mode)
        if not force and image_exists(client, tag):
            return tag
    with _build_lock(python):
        if base == "auto":
            mode = "registry" if registry_reachable(client, python) else "debootstrap"
            progress(f"no registry reachable: building offline from Debian {release_for(python)}"
                     if mode == "debootstrap" else f"registry reachable: building on python:{python}-slim")
        else:
            mode = base
        tag = image_tag(python, mode)
        if not force and image_exists(client, tag):
            return tag
        started = time.monotonic()
        if mode == "registry":
            _docker_build(client, "Dockerfile", tag, {"BASE": f"python:{python}-slim"}, progress, network=True)
        else:
            base_tag = ensure_debian_base(client, python, progress, force=force)
            _docker_build(client, "Dockerfile.offline", tag, {"BASE": base_tag}, progress, network=False)
        client.images.get(tag).tag(REPOSITORY, f"py{python}")
        progress(f"built {tag} in {time.monotonic() - started:.0f}s")
        return tag


def image_exists(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


@contextmanager
def _build_lock(python: str) -> Iterator[None]:
    lock_dir = Path(user_cache_dir("harness"))
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"build-py{python}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure_debian_base(client: docker.DockerClient, python: str, progress: Progress, force: bool = False) -> str:
    """A minimal Debian image for `python` made with debootstrap and `docker import`."""
    release = release_for(python)
    h = hashlib.sha256(f"{release}\n{' '.join(DEBIAN_PACKAGES)}".encode()).hexdigest()[:12]
    tag = f"{BASE_REPOSITORY}:{release}-{h}"
    if not force and image_exists(client, tag):
        return tag
    debootstrap = shutil.which("debootstrap") or (
        "/usr/sbin/debootstrap" if os.path.exists("/usr/sbin/debootstrap") else None)
    if debootstrap is None:
        raise ImageError("debootstrap is not installed; install it (apt-get install debootstrap) or build "
                         "with --base registry where a container registry is reachable")
    if os.geteuid() != 0:
        raise ImageError("debootstrap needs root to make the base image; run `sudo harness sandbox build` "
                         "once, or use --base registry where a container registry is reachable")
    mirror = apt_mirror()
    with tempfile.TemporaryDirectory(prefix="harness-debootstrap-") as tmp:
        root = Path(tmp) / "root"
        progress(f"debootstrap {release} from {mirror} (about a minute)")
        _run_debootstrap([debootstrap, "--variant=minbase", f"--include={','.join(DEBIAN_PACKAGES)}",
                          release, str(root), mirror], progress)
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(root / cache, ignore_errors=True)
        progress(f"importing the {release} root filesystem into Docker")
        archive = Path(tmp) / "root.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(root, arcname=".")
        repo, _, version = tag.partition(":")
        client.api.import_image_from_file(str(archive), repository=repo, tag=version,
                                          changes=[f"LABEL {HASH_LABEL}={h}", "LABEL harness.managed=true",
                                                   'CMD ["/bin/bash"]'])
    return tag


def _run_debootstrap(cmd: list[str], progress: Progress) -> None:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip()
        tail = (tail + [line])[-20:]
        if line.startswith("I: "):
            progress("debootstrap: " + line[3:])
    if proc.wait() != 0:
        raise ImageError(f"debootstrap failed (exit {proc.returncode}): " + "\n".join(tail))


def _docker_build(client: docker.DockerClient, dockerfile: str, tag: str, buildargs: dict[str, str],
                  progress: Progress, network: bool) -> None:
    progress(f"docker build {dockerfile} -> {tag}")
    version = tag.partition(":")[2]
    build_context(client, CONTEXT_DIR, tag, labels={HASH_LABEL: version.rsplit("-", 1)[-1]}, progress=progress,
                  dockerfile=f"image/{dockerfile}", buildargs=buildargs, network=network)


def build_context(client: docker.DockerClient, context: Path, tag: str, *, labels: dict[str, str],
                  progress: Progress = quiet, dockerfile: str = "Dockerfile",
                  buildargs: dict[str, str] | None = None, network: bool = False) -> None:
    """`docker build` of `context` into `tag` (labelled as the harness's), reporting each step.

    Raises:
        ImageError: the build failed; the message holds Docker's error and the last lines of the log.
    """
    logs: list[str] = []
    try:
        for chunk in client.api.build(path=str(context), dockerfile=dockerfile, tag=tag, buildargs=buildargs or {},
                                      labels={**labels, "harness.managed": "true"}, rm=True, forcerm=True,
                                      decode=True, network_mode=None if network else "none"):
            if "error" in chunk:
                raise ImageError(f"building {tag} failed: {chunk['error'].strip()}\n" + "".join(logs[-30:]))
            text = chunk.get("stream", "")
            if text:
                logs.append(text)
                if text.startswith("Step "):
                    progress(text.strip())
    except docker.errors.APIError as exc:
        raise ImageError(f"building {tag} failed: {exc}") from exc


def current_tags() -> set[str]:
    """The sandbox and base image tags the present sources would build, for every Python version."""
    tags = set()
    for python, release in PYTHON_RELEASES.items():
        tags |= {image_tag(python, "registry"), image_tag(python, "debootstrap")}
        h = hashlib.sha256(f"{release}\n{' '.join(DEBIAN_PACKAGES)}".encode()).hexdigest()[:12]
        tags.add(f"{BASE_REPOSITORY}:{release}-{h}")
    return tags


def stale_images(client: docker.DockerClient, label: str | None = None) -> list[tuple[str, str]]:
    """(id, name) of the harness's images that the present sources no longer use: sandbox and base
    images of older inputs, images built on those (BASE_LABEL), and untagged leftovers of rebuilds.
    `label` ("key=value"): only images that also carry it. Newest first: an image built on another
    (an instance on its environment) is removed before it, so one prune removes both."""
    current = current_tags()
    stale = []
    images = client.api.images(filters={"label": ["harness.managed=true", *([label] if label else [])]})
    for image in sorted(images, key=lambda i: -int(i.get("Created") or 0)):
        tags = [t for t in image.get("RepoTags") or [] if t != "<none>:<none>"]
        ours = [t for t in tags if t.startswith((REPOSITORY + ":", BASE_REPOSITORY + ":"))]
        base = (image.get("Labels") or {}).get(BASE_LABEL)
        if not tags or (ours and not current & set(ours)) or (base and base not in current):
            stale.append((image["Id"], tags[0] if tags else image["Id"][7:19]))
    return stale


def prune(client: docker.DockerClient, dry_run: bool = False,
          label: str | None = None) -> tuple[list[str], list[str]]:
    """Remove `stale_images` (only those carrying `label`, if given); returns (removed, kept because a
    container still uses them). An image refused because of a stale image built on it (created in the
    same second, so listed after it) is tried again once the others are gone."""
    removed: list[str] = []
    todo = stale_images(client, label)
    if dry_run:
        return [name for _, name in todo], []
    for _ in range(2):
        refused = []
        for image_id, name in todo:
            try:
                for ref in list(client.images.get(image_id).tags) or [image_id]:
                    client.api.remove_image(ref, noprune=False)   # never forced: an image in use stays
                removed.append(name)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                if exc.status_code != 409:
                    raise
                refused.append((image_id, name))
        todo = refused
    return removed, [name for _, name in todo]
