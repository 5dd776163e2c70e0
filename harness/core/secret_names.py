"""Files that hold secrets by what they are: the name rules, each with the place it comes from.

The content scan (`harness.core.secret_scan`) finds a secret whatever the file is called; these rules
add the files whose format exists to hold a credential, whether or not the scanner recognises what is
inside (a `.pgpass` line, a PuTTY key, a Terraform state, a keystore that is binary). A rule names a
file by its name (matched lowercased, as a whole) or by a folder on its path.

Sources (kept in `NameRule.source`): gitrob's file signatures (github.com/michenriksen/gitrob,
core/signatures.go, MIT), which shhgit and its successors reuse, trimmed to files whose format holds a
credential (gitrob also flags `settings.py`, `database.yml`, `*.log`, `*.sqlite`: ordinary files of
most projects, which the content scan covers instead); and the documentation of each tool that writes
the file (named in the rule). A name ending in `.example`, `.sample`, `.template` or `.dist` is a
committed template and is not left out by its name (its content is still scanned).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath


@dataclass(frozen=True)
class NameRule:
    """`id` is what the operator is told; `what` says what such a file holds; `source` where the rule
    comes from."""

    id: str
    pattern: str
    what: str
    source: str

    def matches(self, name: str) -> bool:
        return re.fullmatch(self.pattern, name) is not None


_NO_EXT = r"[^.]*"          # an SSH key file has no extension (id_rsa_github, deploy_key), its .pub has one
GITROB = "gitrob core/signatures.go"

NAME_RULES: tuple[NameRule, ...] = (
    NameRule("name:dotenv", r"\.env(\..+)?", "environment file with the project's secrets",
             "dotenv convention; gitleaks and GitHub push protection examples"),
    NameRule("name:envrc", r"\.envrc", "direnv environment file (exports credentials)", "direnv documentation"),
    NameRule("name:ssh-private-key", rf"id_(rsa|dsa|ecdsa|ed25519|ecdsa_sk|ed25519_sk|xmss){_NO_EXT}"
             rf"|{_NO_EXT}_(rsa|dsa|ecdsa|ed25519)", "SSH private key", f"{GITROB} (*_rsa ...); ssh-keygen(1)"),
    NameRule("name:deploy-key", rf"({_NO_EXT}[_-])?deploy[_-]?key({_NO_EXT})?", "SSH deploy key",
             "GitHub documentation, managing deploy keys"),
    NameRule("name:private-key-file", r".+\.(pem|key|keypair|ppk|p8)", "private key (PEM, PuTTY, PKCS#8)",
             f"{GITROB} (.pem, .key); PuTTY documentation (.ppk)"),
    NameRule("name:key-bundle", r".+\.(p12|pfx|pkcs12|jks|keystore|bks)", "key and certificate bundle",
             f"{GITROB} (.p12, .pfx, .pkcs12, .jks)"),
    NameRule("name:password-store", r".+\.(kdbx|kdb|keychain|agilekeychain|psafe3|kwallet)",
             "password manager database", f"{GITROB}"),
    NameRule("name:kubeconfig", r"(.+[._-])?kubeconfig([_-][^.]*)?(\.(ya?ml|json|conf))?|kube\.?config",
             "Kubernetes client config (cluster tokens, client keys)", "Kubernetes documentation, kubeconfig files"),
    NameRule("name:pgpass", r"\.?pgpass(\.conf)?", "PostgreSQL password file",
             f"{GITROB}; PostgreSQL documentation, the password file"),
    NameRule("name:mysql-options", r"\.my\.cnf|\.mylogin\.cnf", "MySQL option file with a password",
             "MySQL documentation, option files"),
    NameRule("name:netrc", r"[._]netrc", "netrc login file", "curl and ftp documentation"),
    NameRule("name:package-registry-token", r"\.pypirc|\.npmrc|\.yarnrc\.yml|\.gem/credentials",
             "package registry credentials", "pip/twine, npm, yarn and RubyGems documentation"),
    NameRule("name:git-credentials", r"\.git-credentials", "git credential store", "git-credential-store(1)"),
    NameRule("name:htpasswd", r"\.htpasswd|proftpdpasswd", "password hashes", f"{GITROB}; Apache documentation"),
    NameRule("name:cloud-cli-config", r"\.s3cfg|\.boto|\.vault-token|\.dockercfg|\.terraformrc|terraform\.rc"
             r"|credentials\.tfrc\.json|\.databrickscfg|\.pulumi-credentials\.json",
             "cloud or infrastructure CLI credentials", f"{GITROB} (.s3cfg); boto, Vault, Docker, Terraform, "
             "Databricks documentation"),
    NameRule("name:terraform-state", r".+\.tfstate(\.backup)?|terraform\.tfvars",
             "Terraform state or variables (hold provider secrets in plain text)",
             f"{GITROB} (terraform.tfvars); Terraform documentation, sensitive data in state"),
    NameRule("name:gcloud-credentials", r"application_default_credentials\.json|service[-_]account.*\.json"
             r"|client_secrets?.*\.json|credentials\.db",
             "Google Cloud credentials", "Google Cloud documentation, application default credentials"),
    NameRule("name:azure-credentials", r".+\.publishsettings|.+\.cscfg|azureprofile\.json",
             "Azure credentials", f"{GITROB} (.cscfg); Azure documentation, publish settings"),
    NameRule("name:credentials-file", r"credentials|.+\.credentials|credentials\.(json|ya?ml|toml|ini|cfg|conf|xml"
             r"|txt|env)|secrets\.(json|ya?ml|toml|env|ini)|secret_token\.rb|otr\.private_key",
             "credentials file", f"{GITROB} (credentials.xml, secret_token.rb, otr.private_key)"),
    NameRule("name:vpn-remote-config", r".+\.(ovpn|tblk|rdp)", "VPN or remote desktop profile (embedded keys)",
             f"{GITROB}"),
    NameRule("name:shell-history", r"\.(bash_|zsh_|sh_|z|mysql_|psql_|irb_|python_|node_repl_)?history",
             "command history (passwords typed on command lines)", f"{GITROB}"),
)
"""Rules on the file name, lowercased; a name matching one is left out unless `--include` names it."""

DIR_RULES: tuple[tuple[tuple[str, ...], str, str], ...] = (
    ((".ssh",), "name:ssh-folder", "ssh-keygen(1), ssh_config(5)"),
    ((".gnupg",), "name:gnupg-folder", "GnuPG documentation"),
    ((".aws",), "name:aws-folder", f"{GITROB} (.aws/credentials); AWS CLI documentation"),
    ((".azure",), "name:azure-folder", "Azure CLI documentation"),
    ((".kube",), "name:kube-folder", "Kubernetes documentation, kubeconfig files"),
    ((".docker",), "name:docker-folder", "Docker documentation, docker login (config.json auths)"),
    ((".config", "gcloud"), "name:gcloud-folder", "Google Cloud documentation, gcloud credentials"),
    ((".password-store",), "name:pass-folder", "pass(1)"),
)
"""Folders (a run of path components) whose every file is left out: (components, rule id, source)."""

TEMPLATE_SUFFIXES = (".example", ".sample", ".template", ".dist")
"""A file name ending so is a committed template (`.env.example`): not left out by its name."""


def name_rule(path: str) -> str | None:
    """The id of the name rule that leaves the relative path `path` out, or None."""
    parts = tuple(part.lower() for part in PurePosixPath(path).parts)
    folders = parts[:-1]
    for components, folder_rule, _ in DIR_RULES:
        width = len(components)
        if any(folders[i:i + width] == components for i in range(len(folders) - width + 1)):
            return folder_rule
    name = parts[-1] if parts else ""
    if name.endswith(TEMPLATE_SUFFIXES):
        return None
    joined = "/".join(parts[-2:])                   # `.gem/credentials` is matched with its folder
    for rule in NAME_RULES:
        if rule.matches(name) or ("/" in rule.pattern and rule.matches(joined)):
            return rule.id
    return None
