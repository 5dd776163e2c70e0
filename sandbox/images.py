"""Building the sandbox image, with or without a container registry.

Two ways, chosen automatically (`base="auto"`) or forced (`"registry"` / `"debootstrap"`):

- registry: `image/Dockerfile` on top of the official `python:X-slim` image (pulled if missing);
- debootstrap: a minimal Debian of the release that ships Python X is bootstrapped into a folder from
  the machine's configured apt mirror, `docker import`-ed as a base, and `image/Dockerfile.offline`
  is built on it with no network.

Images are tagged by a hash of everything that goes into them and labelled with it, so a build runs
only when its inputs change. Concurrent builders on one machine wait for each other (a file lock).

A variant with more Debian packages (`packages=`: a C toolchain and the libraries a project's official
recipe installs with apt) is built the same two ways: debootstrap includes them, or apt-get installs
them on the official image. Its tag and labels name the packages, so `prune` keeps it while the sources
that made it stand.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator, Sequence
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
PACKAGES_LABEL = "harness.image.packages"   # on a variant: its extra Debian packages, space-separated
PYTHON_LABEL = "harness.image.python"
MODE_LABEL = "harness.image.mode"
BASE_LABEL = "harness.base"   # on images built FROM a sandbox image: which one (prune removes them with it)
PYTHON_RELEASES = {"3.9": "bullseye", "3.11": "bookworm", "3.13": "trixie"}
DEBIAN_PACKAGES = ["python3", "python3-pip", "python3-venv", "python3-pytest", "python3-pyflakes",
                   "git", "procps", "ca-certificates", "patch", "less", "bash-static"]
TOOLCHAIN_PACKAGES = ("build-essential", "python3-dev", "pkg-config")
"""What a project that compiles C extensions at install needs beyond the sandbox image."""
_DEBIAN_NAME = re.compile(r"[a-z0-9][a-z0-9+.-]+")   # Debian policy: package names


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


def extra_packages(packages: Sequence[str]) -> tuple[str, ...]:
    """`packages` checked (Debian package names), without the sandbox image's own, sorted and once each.

    Raises:
        ImageError: a name is not a Debian package name (it could become an option of apt or debootstrap).
    """
    bad = [p for p in packages if not (isinstance(p, str) and _DEBIAN_NAME.fullmatch(p))]
    if bad:
        raise ImageError(f"Debian package name(s) refused: {bad}; expected lower-case names such as "
                         "'libfreetype-dev' or 'g++'")
    return tuple(sorted(set(packages) - set(DEBIAN_PACKAGES)))


def inputs_hash(python: str, mode: str, packages: Sequence[str] = ()) -> str:
    extra = f"+{' '.join(packages)}" if packages else ""
    h = hashlib.sha256(f"{python}\n{mode}\n{' '.join(DEBIAN_PACKAGES)}{extra}\n".encode())
    for path in [IMAGE_DIR / ("Dockerfile" if mode == "registry" else "Dockerfile.offline"), *server_files()]:
        h.update(f"{path.relative_to(CONTEXT_DIR)}\n".encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def image_tag(python: str, mode: str, packages: Sequence[str] = ()) -> str:
    variant = "-plus" if packages else ""
    return f"{REPOSITORY}:py{python}-{mode}{variant}-{inputs_hash(python, mode, packages)}"


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
                 progress: Progress = quiet, force: bool = False, packages: Sequence[str] = ()) -> str:
    """The tag of an up-to-date sandbox image for `python` (with the Debian `packages` too, a variant),
    building it if needed.

    Raises:
        ImageError: the build failed (a package the mirror does not have among the reasons), a package
            name is refused, or `python` cannot be had offline.
        DockerUnavailable: no Docker daemon.
    """
    client = client_or_default(client)
    if base not in ("auto", "registry", "debootstrap"):
        raise ImageError(f"--base must be auto, registry or debootstrap, got {base!r}; e.g. --base debootstrap")
    extra = extra_packages(packages)
    for mode in (("registry", "debootstrap") if base == "auto" else (base,)):
        tag = image_tag(python, mode, extra)
        if not force and image_exists(client, tag):
            return tag
    with _build_lock(python):
        if base == "auto":
            mode = "registry" if registry_reachable(client, python) else "debootstrap"
            progress(f"no registry reachable: building offline from Debian {release_for(python)}"
                     if mode == "debootstrap" else f"registry reachable: building on python:{python}-slim")
        else:
            mode = base
        tag = image_tag(python, mode, extra)
        if not force and image_exists(client, tag):
            return tag
        started = time.monotonic()
        labels = {PYTHON_LABEL: python, MODE_LABEL: mode, **({PACKAGES_LABEL: " ".join(extra)} if extra else {})}
        if mode == "registry":
            _docker_build(client, "Dockerfile", tag, {"BASE": f"python:{python}-slim",
                                                      "PACKAGES": " ".join(extra)}, progress, network=True,
                          labels=labels)
        else:
            debian = ensure_debian_base(client, python, progress, force=force, packages=extra)
            _docker_build(client, "Dockerfile.offline", tag, {"BASE": debian}, progress, network=False,
                          labels=labels)
        if not extra:
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


def base_tag(release: str, packages: Sequence[str] = ()) -> str:
    """The tag of the debootstrapped Debian `release` (with the extra `packages`)."""
    extra = f"+{' '.join(packages)}" if packages else ""
    h = hashlib.sha256(f"{release}\n{' '.join(DEBIAN_PACKAGES)}{extra}".encode()).hexdigest()[:12]
    return f"{BASE_REPOSITORY}:{release}{'-plus' if packages else ''}-{h}"


def ensure_debian_base(client: docker.DockerClient, python: str, progress: Progress, force: bool = False,
                       packages: Sequence[str] = ()) -> str:
    """A minimal Debian image for `python` (with the extra `packages`) made with debootstrap and `docker import`."""
    release = release_for(python)
    tag = base_tag(release, packages)
    h = tag.rsplit("-", 1)[-1]
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
        progress(f"debootstrap {release} from {mirror} (about a minute"
                 + (f"; more with {len(packages)} extra package(s): {' '.join(packages)})" if packages else ")"))
        _run_debootstrap([debootstrap, "--variant=minbase", f"--include={','.join([*DEBIAN_PACKAGES, *packages])}",
                          release, str(root), mirror], progress)
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(root / cache, ignore_errors=True)
        progress(f"importing the {release} root filesystem into Docker")
        archive = Path(tmp) / "root.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(root, arcname=".")
        repo, _, version = tag.partition(":")
        variant = [f'LABEL {PACKAGES_LABEL}="{" ".join(packages)}" {PYTHON_LABEL}={python}'] if packages else []
        client.api.import_image_from_file(str(archive), repository=repo, tag=version,
                                          changes=[f"LABEL {HASH_LABEL}={h}", "LABEL harness.managed=true", *variant,
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
                  progress: Progress, network: bool, labels: dict[str, str]) -> None:
    progress(f"docker build {dockerfile} -> {tag}")
    version = tag.partition(":")[2]
    build_context(client, CONTEXT_DIR, tag, labels={HASH_LABEL: version.rsplit("-", 1)[-1], **labels},
                  progress=progress, dockerfile=f"image/{dockerfile}", buildargs=buildargs, network=network)


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


def current_tags(variants: Sequence[tuple[str, str]] = ()) -> set[str]:
    """The sandbox and base image tags the present sources would build, for every Python version, and
    for each (python, packages) of `variants` (the labels of the variants found)."""
    tags = set()
    for python, release in PYTHON_RELEASES.items():
        tags |= {image_tag(python, "registry"), image_tag(python, "debootstrap"), base_tag(release)}
    for python, packages in variants:
        if python in PYTHON_RELEASES:
            extra = tuple(packages.split())
            tags |= {image_tag(python, "registry", extra), image_tag(python, "debootstrap", extra),
                     base_tag(PYTHON_RELEASES[python], extra)}
    return tags


def stale_images(client: docker.DockerClient, label: str | None = None) -> list[tuple[str, str]]:
    """(id, name) of the harness's images that the present sources no longer use: sandbox and base
    images of older inputs, images built on those (BASE_LABEL), and untagged leftovers of rebuilds.
    `label` ("key=value"): only images that also carry it. Newest first: an image built on another
    (an instance on its environment) is removed before it, so one prune removes both."""
    images = client.api.images(filters={"label": ["harness.managed=true", *([label] if label else [])]})
    labelled = [(i.get("Labels") or {}) for i in client.api.images(filters={"label": [PACKAGES_LABEL]})]
    current = current_tags([(ls.get(PYTHON_LABEL, ""), ls[PACKAGES_LABEL]) for ls in labelled])
    stale = []
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
