"""Secrets stay out of the sandbox (harness.core.project with secret_names and secret_scan), on real git
checkouts: files that hold secrets by what they are, and secrets inside files of any name, each left
out with its rule (and line); ordinary files, templates and documented example keys go in; --include
puts one back; the secret's value never reaches what the operator is told or what is stored."""

from __future__ import annotations

import base64
import json
import os
import secrets
import string
import subprocess
import time
import zlib
from pathlib import Path

import pytest

from harness.agent.inplace import selection_lines
from harness.agent.trajectory import load_trajectory
from harness.cli.main import main
from harness.core import secret_scan
from harness.core.project import SECRET, LeftOut, ProjectFiles, select_files
from harness.core.sources import GIT_IDENTITY, cache_dir

ALNUM = string.ascii_letters + string.digits


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={**os.environ, **GIT_IDENTITY})


def checkout(root: Path, files: dict[str, str]) -> Path:
    """A real git checkout holding `files` (all committed)."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "start")
    return root


def random_text(alphabet: str, n: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def private_key_pem() -> str:
    """An RSA private key block in PEM form, made fresh (random body: never a real key)."""
    body = base64.b64encode(secrets.token_bytes(1190)).decode()
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END RSA PRIVATE KEY-----\n"


def github_token() -> str:
    """A classic GitHub personal access token: ghp_, 30 random characters and their CRC32 in base 62."""
    body = random_text(ALNUM, 30)
    crc, digits = zlib.crc32(body.encode()), ""
    while crc:
        crc, r = divmod(crc, 62)
        digits = (string.digits + string.ascii_uppercase + string.ascii_lowercase)[r] + digits
    return "ghp_" + body + digits.rjust(6, "0")


def aws_key_pair() -> tuple[str, str]:
    return "AKIA" + random_text(string.ascii_uppercase + "234567", 16), random_text(ALNUM + "/+", 40)


def slack_webhook() -> str:
    return (f"https://hooks.slack.com/services/T{random_text(string.ascii_uppercase + string.digits, 10)}"
            f"/B{random_text(string.ascii_uppercase + string.digits, 10)}/{random_text(ALNUM, 24)}")


def told(project: ProjectFiles) -> str:
    """Everything the operator is shown of a selection, and how it is represented."""
    return "\n".join(selection_lines(project)) + repr(project) + repr(project.left_out)


def secret_of(project: ProjectFiles, rel: str) -> LeftOut:
    [item] = [item for item in project.left_out if item.path == rel]
    assert item.why == SECRET and rel not in project.files
    return item


NAMED = {
    "kubeconfig": "name:kubeconfig",
    "deploy/prod.kubeconfig": "name:kubeconfig",
    ".envrc": "name:envrc",
    ".pgpass": "name:pgpass",
    "keys/id_rsa_github": "name:ssh-private-key",
    "ci/deploy_key": "name:deploy-key",
    "putty/server.ppk": "name:private-key-file",
    "infra/terraform.tfstate": "name:terraform-state",
    "infra/terraform.tfstate.backup": "name:terraform-state",
    "gcloud/application_default_credentials.json": "name:gcloud-credentials",
    ".env": "name:dotenv",
    ".env.production": "name:dotenv",
    "config/id_ed25519": "name:ssh-private-key",
    "certs/server.KEY": "name:private-key-file",
    "store/app.p12": "name:key-bundle",
    "credentials.json": "name:credentials-file",
    "config/secrets.yaml": "name:credentials-file",
    ".aws/config": "name:aws-folder",
    "home/.ssh/known_hosts": "name:ssh-folder",
    "home/.config/gcloud/access_tokens.db": "name:gcloud-folder",
    ".netrc": "name:netrc",
    ".docker/config.json": "name:docker-folder",
}
"""Files that hold secrets by what they are, with the rule that names them (their content is plain)."""

ORDINARY = {
    "README.md": "# Shop\n\nSet DB_PASSWORD in the environment; see .env.example.\n",
    "shop/db.py": "import os\n\npassword = os.environ['DB_PASSWORD']\ntoken = os.getenv('API_TOKEN', '')\n",
    ".env.example": "API_KEY=\nDB_PASSWORD=change-me\n",
    "config/secrets.yaml.example": "api_key: <your key>\n",
    "id_rsa.pub": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEXAMPLEEXAMPLEEXAMPLE user@host\n",
    "k8s/kubeconfig.go": "package k8s\n\n// Load reads a kubeconfig file.\nfunc Load() {}\n",
    "ci/deploy_key.py": "def deploy_key_path():\n    return '~/.ssh/deploy'\n",
    "shop/credentials.py": "def check(user, password):\n    return bool(user and password)\n",
    "docs/secrets.md": "# How we keep secrets\n\nNever commit a key.\n",
    "HISTORY": "1.0: first release\n",
    # AWS's documented example pair (docs.aws.amazon.com): a known fake, as in countless tests
    "tests/fixtures/aws.py": "AWS_ACCESS_KEY_ID = 'AKIAIOSFODNN7EXAMPLE'\n"
                             "AWS_SECRET_ACCESS_KEY = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'\n",
    "shop/settings.py": "DEBUG = False\nSECRET_KEY = os.environ['SECRET_KEY']\nALLOWED_HOSTS = ['shop.example']\n",
    # credential URLs with the placeholders documentation writes (Django's and Sphinx's own docs and tests)
    "docs/cache.txt": "    'LOCATION': 'redis://username:password@127.0.0.1:6379',\n",
    "tests/test_http.py": "URL = r'http://user:pass@testserver/'\nOTHER = 'https://user:12345@domain.com/objects.inv'\n",
}
"""Ordinary files of a project, several of which mention secrets or look like secret names: all go in."""


def test_files_that_hold_secrets_by_name_are_left_out_with_their_rule(tmp_path: Path) -> None:
    repo = checkout(tmp_path / "shop", {**{rel: "plain text, no secret\n" for rel in NAMED}, **ORDINARY})
    project = select_files(repo)
    for rel, rule in NAMED.items():
        item = secret_of(project, rel)
        assert (item.rule, item.line) == (rule, 0), rel
        assert f"{rel} ({rule})" in project.secrets_told()
    first = f"left out as secrets ({len(NAMED)}): .aws/config (name:aws-folder), "
    assert selection_lines(project)[1].startswith(first)
    assert sorted(project.files) == sorted(ORDINARY)            # positive control: ordinary files go in


def test_secrets_inside_innocently_named_files_are_left_out_with_rule_and_line(tmp_path: Path) -> None:
    key_id, key_secret = aws_key_pair()
    pem, token, hook = private_key_pem(), github_token(), slack_webhook()
    one_line_pem = pem.replace("\n", "\\n")
    db_password = random_text(ALNUM, 16)
    repo = checkout(tmp_path / "shop", {
        **ORDINARY,
        "notes.txt": "Server notes\n\nthe key:\n" + pem,
        "shop/settings_local.py": f"DEBUG = True\nAWS_ACCESS_KEY_ID = '{key_id}'\n"
                                  f"AWS_SECRET_ACCESS_KEY = '{key_secret}'\n",
        "deploy/release.sh": f"#!/bin/sh\n# publish\nexport GITHUB_TOKEN={token}\ngh release create\n",
        "ops/alerts.yml": f"name: alerts\nchannels:\n  - slack: {hook}\n",
        "shop/signing.py": f"import jwt\n\nKEY = \"{one_line_pem}\"\n",
        "shop/settings_prod.py": f"DEBUG = False\nDATABASE_URL = 'postgres://shop:{db_password}@db.internal:5432/shop'\n",
    })
    project = select_files(repo)
    expected = {
        "notes.txt": ("betterleaks.private-key", 4),
        "shop/settings_local.py": ("betterleaks.aws-access-token", 2),
        "deploy/release.sh": ("betterleaks.github-pat", 3),
        "ops/alerts.yml": ("betterleaks.slack-webhook-url", 3),
        "shop/signing.py": ("betterleaks.private-key", 3),
        "shop/settings_prod.py": ("betterleaks.generic-credential-uri", 2),
    }
    for rel, (rule, line) in expected.items():
        item = secret_of(project, rel)
        assert (item.rule, item.line) == (rule, line), rel
        assert f"{rel} (line {line}: {rule})" in selection_lines(project)[1]
    assert sorted(project.files) == sorted(ORDINARY)
    assert project.total_bytes == sum(len(text.encode()) for text in ORDINARY.values())
    shown = told(project)
    for value in (key_id, key_secret, token, hook, pem.splitlines()[1], hook.rsplit("/", 1)[1], db_password):
        assert value not in shown


def test_include_puts_a_file_back_whether_left_out_by_name_or_by_content(tmp_path: Path) -> None:
    token = github_token()
    repo = checkout(tmp_path / "shop", {"app.py": "x = 1\n", ".envrc": "export A=1\n",
                                        "tests/fixtures/token.txt": f"{token}\n", "other.txt": f"{token}\n"})
    before = select_files(repo)
    assert sorted(before.secrets()) == [".envrc", "other.txt", "tests/fixtures/token.txt"]
    after = select_files(repo, include=(".envrc", "tests/fixtures/*"))
    assert after.files == [".envrc", "app.py", "tests/fixtures/token.txt"]
    assert after.secrets() == ["other.txt"]
    assert "put one back with --include PATH" in selection_lines(after)[1]


def test_a_secret_past_the_first_window_of_a_big_file_is_found_on_its_line(tmp_path: Path) -> None:
    filler = "x = 'ordinary line of a generated data file'\n"
    count = secret_scan.WINDOW // len(filler) + 1000          # the key starts past the first window
    repo = checkout(tmp_path / "data", {"dump.py": filler * count + "K = '''\n" + private_key_pem() + "'''\n"})
    item = secret_of(select_files(repo), "dump.py")
    assert (item.rule, item.line) == ("betterleaks.private-key", count + 2)     # after the K = line


def test_binary_files_are_not_scanned_and_their_secrets_named_by_file_are_left_out(tmp_path: Path) -> None:
    repo = checkout(tmp_path / "shop", {"app.py": "x = 1\n"})
    (repo / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0" + secrets.token_bytes(4000))
    (repo / "store.jks").write_bytes(b"\xfe\xed\xfe\xed\0\0\0\x02" + secrets.token_bytes(2000))
    project = select_files(repo)
    assert project.files == ["app.py", "logo.png"]
    assert secret_of(project, "store.jks").rule == "name:key-bundle"


def test_a_changed_file_is_scanned_again_even_at_the_same_size_and_modification_time(tmp_path: Path) -> None:
    token = github_token()
    clean = "TOKEN = '" + "x" * len(token) + "'\n"
    repo = checkout(tmp_path / "shop", {"release.py": clean})
    aged = time.time() - 3600
    os.utime(repo / "release.py", (aged, aged))
    time.sleep(secret_scan.RACY_NS / 1e9 + 0.2)                # old enough for its verdict to be kept
    assert select_files(repo).files == ["release.py"]
    assert select_files(repo).files == ["release.py"]          # second time: from the kept verdict
    (repo / "release.py").write_text("TOKEN = '" + token + "'\n")
    os.utime(repo / "release.py", (aged, aged))                # same size and mtime; the change time moved
    item = secret_of(select_files(repo), "release.py")
    assert (item.rule, item.line) == ("betterleaks.github-pat", 1)


def test_the_stored_verdicts_hold_rule_ids_and_lines_never_a_value(tmp_path: Path) -> None:
    token = github_token()
    repo = checkout(tmp_path / "shop", {"release.py": f"TOKEN = '{token}'\n"})
    aged = time.time() - 3600
    os.utime(repo / "release.py", (aged, aged))
    time.sleep(secret_scan.RACY_NS / 1e9 + 0.2)
    assert secret_of(select_files(repo), "release.py").rule == "betterleaks.github-pat"
    stored = (cache_dir() / "secret-scan" / "verdicts.json").read_text()
    assert "betterleaks.github-pat" in stored and token not in stored and token[4:] not in stored


@pytest.mark.docker
def test_harness_run_tells_each_secret_by_rule_and_line_and_the_sandbox_never_holds_it(
        tmp_path: Path, sandbox_image: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "HARNESS_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path / "state"))
    pem, token = private_key_pem(), github_token()
    repo = checkout(tmp_path / "shop", {"app.py": "x = 1\n", "notes.txt": "Server notes\n\nthe key:\n" + pem,
                                        ".pgpass": "db:5432:shop:app:hunter2\n",
                                        "tests/fixtures/token.txt": f"{token}\n"})
    look = [{"type": "text", "text": "What is here?"},
            {"type": "tool_use", "name": "bash", "input": {"command": "find . -type f -not -path './.git/*' | sort"}}]
    model = tmp_path / "look.json"
    model.write_text(json.dumps({"turns": [look, [{"type": "text", "text": "Nothing to change."}]]}))
    out = tmp_path / "run"
    code = main(["run", "--repo", str(repo), "--problem", "look around", "--model", f"scripted:{model}",
                 "--include", "tests/fixtures/*", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    assert ("left out as secrets (2): .pgpass (name:pgpass), notes.txt (line 4: betterleaks.private-key); "
            "put one back with --include PATH") in captured.err
    listing = [r.content for m in load_trajectory(out / "trajectory.jsonl") for r in m.tool_results][0]
    files = {line.strip() for line in listing.splitlines() if line.strip().startswith("./")}
    assert files == {"./app.py", "./tests/fixtures/token.txt"}, listing     # --include put the fixture back
    recorded = captured.out + captured.err + "".join(
        p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
    for value in (*pem.splitlines()[1:-1], "hunter2"):
        assert value not in recorded
