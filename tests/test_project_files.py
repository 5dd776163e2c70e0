"""Which of an operator's files go into the sandbox (harness.core.project), on real git checkouts and
plain folders: tracked and unignored files with uncommitted work, no ignored environment, no secrets
unless named, no link leading out, caps that name the offenders; staging copies and never follows."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness.core.project import looks_secret, select_files, stage
from harness.core.sources import GIT_IDENTITY
from harness.errors import TaskError


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={**os.environ, **GIT_IDENTITY})


@pytest.fixture()
def checkout(tmp_path: Path) -> Path:
    """A real checkout: committed files, an uncommitted edit, a new untracked file, a deleted tracked
    file, an ignored virtualenv and build output, a .env with a fake key, a key file, a link out."""
    repo = tmp_path / "shop"
    (repo / "shop").mkdir(parents=True)
    (repo / "shop" / "cart.py").write_text("def total(items):\n    return sum(items)\n")
    (repo / "shop" / "old.py").write_text("OLD = 1\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_cart.py").write_text("from shop.cart import total\n\ndef test_total():\n"
                                                 "    assert total([1, 2]) == 4\n")
    (repo / ".gitignore").write_text(".venv/\n*.log\n")
    (repo / ".env.example").write_text("API_KEY=\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "start")
    (repo / "shop" / "cart.py").write_text("def total(items):\n    return sum(items)  # uncommitted\n")
    (repo / "shop" / "discount.py").write_text("RATE = 0.1\n")
    (repo / "shop" / "old.py").unlink()
    (repo / ".venv" / "lib").mkdir(parents=True)
    (repo / ".venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (repo / ".venv" / "lib" / "big.py").write_text("x = 1\n")
    (repo / "run.log").write_text("log\n")
    (repo / ".env").write_text("API_KEY=sk-fake-0123456789\n")
    (repo / "deploy.pem").write_text("-----BEGIN PRIVATE KEY-----\n")
    os.symlink("/etc/passwd", repo / "passwd")
    os.symlink("shop/cart.py", repo / "cart_link.py")
    return repo


def test_a_checkout_gives_its_working_tree_as_the_operator_sees_it(checkout: Path) -> None:
    project = select_files(checkout)
    assert project.mode == "git"
    assert project.files == [".env.example", ".gitignore", "cart_link.py", "shop/cart.py", "shop/discount.py",
                             "tests/test_cart.py"]
    assert sorted(project.secrets()) == [".env", "deploy.pem"]
    assert {item.path: item.why for item in project.left_out}["passwd"] == \
        "a symbolic link that leads out of the project"


def test_an_include_pattern_puts_a_secret_looking_file_back(checkout: Path) -> None:
    project = select_files(checkout, include=("*.pem",))
    assert "deploy.pem" in project.files and ".env" not in project.files
    assert project.secrets() == [".env"]


def test_staging_copies_exactly_the_selection_with_uncommitted_work_and_leaves_the_checkout_alone(
        checkout: Path, tmp_path: Path) -> None:
    (checkout / "tests" / "run.sh").write_text("#!/bin/sh\necho ok\n")
    (checkout / "tests" / "run.sh").chmod(0o755)
    before = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain"], capture_output=True,
                            text=True).stdout
    staged = stage(select_files(checkout), tmp_path / "staged")
    copied = sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if not p.is_dir())
    assert copied == [".env.example", ".gitignore", "cart_link.py", "shop/cart.py", "shop/discount.py",
                      "tests/run.sh", "tests/test_cart.py"]
    assert "# uncommitted" in (staged / "shop" / "cart.py").read_text()
    assert os.readlink(staged / "cart_link.py") == "shop/cart.py"
    assert os.access(staged / "tests" / "run.sh", os.X_OK)
    assert not (staged / ".env").exists() and not (staged / ".venv").exists()
    after = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain"], capture_output=True,
                           text=True).stdout
    assert after == before


def test_a_subfolder_of_a_checkout_gives_only_its_own_files(checkout: Path) -> None:
    assert select_files(checkout / "shop").files == ["cart.py", "discount.py"]


def test_a_folder_outside_git_leaves_out_caches_environments_and_secrets(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    for rel in ("app/main.py", "app/__pycache__/main.cpython-311.pyc", "myenv/bin/python", "node_modules/x/i.js",
                "build/lib/app.py", "app.egg-info/PKG-INFO", ".env", "notes.txt", "app/util.pyc", ".ssh/config"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x\n")
    (root / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    project = select_files(root)
    assert project.mode == "folder"
    assert project.files == ["app/main.py", "notes.txt"]
    assert sorted(project.skipped_dirs) == ["app.egg-info", "app/__pycache__", "build", "myenv", "node_modules"]
    assert sorted(project.secrets()) == [".env", ".ssh/config"]


def test_over_the_caps_the_error_names_the_biggest_folders_and_files(tmp_path: Path) -> None:
    root = tmp_path / "big"
    (root / "data").mkdir(parents=True)
    (root / "data" / "dump.sql").write_bytes(b"x" * 5000)
    (root / "main.py").write_text("x = 1\n")
    with pytest.raises(TaskError) as caught:
        select_files(root, max_bytes=1000)
    message = str(caught.value)
    assert "over the cap of" in message and "data (1 files, 5000 bytes)" in message
    assert "data/dump.sql (5000 bytes)" in message and "--repo" in message


def test_a_missing_folder_is_refused_with_an_example(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match=r"is not a folder.*e\.g\. --repo"):
        select_files(tmp_path / "nope")


def test_staging_refuses_an_existing_destination(checkout: Path, tmp_path: Path) -> None:
    (tmp_path / "staged").mkdir()
    with pytest.raises(TaskError, match="already exists"):
        stage(select_files(checkout), tmp_path / "staged")


@pytest.mark.parametrize(("path", "secret"), [
    (".env", True), (".env.production", True), (".env.example", False), ("config/id_rsa", True),
    ("id_rsa.pub", False), ("deploy/server.KEY", True), ("credentials.json", True), (".aws/config", True),
    ("src/keys.py", False), ("docs/secrets.md", False), ("config/secrets.yaml", True), ("README.md", False),
    ("kubeconfig", True), (".pgpass", True), ("keys/id_rsa_github", True), ("infra/terraform.tfstate", True),
    ("shop/credentials.py", False), ("k8s/kubeconfig.go", False), ("ci/deploy_key.py", False),
])
def test_secret_looking_names(path: str, secret: bool) -> None:
    assert looks_secret(path) is secret
