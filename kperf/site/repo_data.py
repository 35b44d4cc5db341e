"""The gate reports, thresholds and git facts (subjects, commit links) the site's pages show."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kperf.site.data import GATE_SCHEMAS, MAX_FILE_BYTES, Notes, label_of


def read_gate_reports(dirs: Iterable[Path], notes: Notes) -> list[dict[str, Any]]:
    """gate.json (and gate.md beside it) of every kept gate run under the folders."""
    reports: list[dict[str, Any]] = []
    seen: set[Path] = set()
    for root in dirs:
        root = Path(root)
        if not root.exists():
            continue
        found = [root] if root.is_file() else sorted(root.rglob("gate.json"))
        for path in found:
            real = path.resolve()
            if real in seen:
                continue
            seen.add(real)
            label = label_of(root.parent if root.is_file() else root, path)
            try:
                if path.stat().st_size > MAX_FILE_BYTES:
                    raise ValueError("larger than 64 MiB")
                rep = json.loads(path.read_text())
                if not isinstance(rep, dict):
                    raise ValueError("not a JSON object")
                if rep.get("schema") not in GATE_SCHEMAS and not isinstance(rep.get("cases"),
                                                                            list):
                    raise ValueError(f"schema {rep.get('schema')!r} is not a gate report")
                if not isinstance(rep.get("cases", []), list):
                    raise ValueError("cases is not a list")
            except (ValueError, OSError) as err:
                notes.add(label, f"gate report cannot be read ({err}): skipped")
                continue
            md = path.with_name("gate.md")
            try:
                rep["_markdown"] = md.read_text(errors="replace")[:500_000] if md.exists() else ""
            except OSError:
                rep["_markdown"] = ""
            rep["_source"] = label
            rep["_mtime"] = path.stat().st_mtime
            rep["_id"] = re.sub(r"[^A-Za-z0-9_.-]+", "_", label.removesuffix("/gate.json"))
            reports.append(rep)
    reports.sort(key=lambda r: -r["_mtime"])
    return reports


def read_thresholds(path: Path, notes: Notes) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else None
    except (ValueError, OSError) as err:
        notes.add(path.name, f"cannot be read ({err})")
        return None


def git(repo: Path, *args: str, stdin: str | None = None) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                             input=stdin, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def commit_subjects(repo: Path, shas: Iterable[str]) -> dict[str, dict[str, Any]]:
    """{sha: {"subject", "time"}} for the commits this repository has."""
    wanted = sorted({s for s in shas if re.fullmatch(r"[0-9a-f]{7,40}", s or "")})
    if not wanted:
        return {}
    check = git(repo, "cat-file", "--batch-check", stdin="\n".join(wanted) + "\n") or ""
    present = [line.split()[0] for line in check.splitlines()
               if len(line.split()) >= 2 and line.split()[1] == "commit"]
    if not present:
        return {}
    out = git(repo, "log", "--no-walk=unsorted", "--stdin", "--format=%H%x00%ct%x00%s",
              stdin="\n".join(present) + "\n") or ""
    info = {}
    for line in out.splitlines():
        parts = line.split("\0", 2)
        if len(parts) == 3:
            info[parts[0]] = {"time": int(parts[1]), "subject": parts[2]}
    return info


_REMOTE = re.compile(r"^(?:(?:https?|ssh|git)://)?(?:[^@/]+@)?([^/:]+)(?::\d+)?[:/](.+?)"
                     r"(?:\.git)?/?$")


def web_url_of_remote(remote: str) -> str | None:
    """https://host/owner/repo of a git remote (https or ssh form, credentials dropped);
    None for a local path."""
    remote = remote.strip()
    if not remote or remote.startswith(("/", ".", "file:")) or os.path.isdir(remote):
        return None
    m = _REMOTE.match(remote)
    if not m or "." not in m.group(1):
        return None
    return f"https://{m.group(1)}/{m.group(2)}"


def commit_url_of_web(web: str) -> str:
    host = web.split("/")[2]
    if "gitlab" in host:
        return web + "/-/commit/"
    if "bitbucket" in host:
        return web + "/commits/"
    return web + "/commit/"


def commit_links(repo: Path, conf: dict[str, Any]) -> tuple[str, str, str]:
    """(show_commit_url, project_url, where they came from). Order: KPERF_COMMIT_URL
    (and KPERF_PROJECT_URL), asv.conf.json's show_commit_url / project_url when set, the
    git remote (origin, else the first)."""
    env_commit = os.environ.get("KPERF_COMMIT_URL", "").strip()
    env_project = os.environ.get("KPERF_PROJECT_URL", "").strip()
    conf_commit = str(conf.get("show_commit_url") or "").strip()
    conf_project = str(conf.get("project_url") or "").strip()
    placeholder = ("", "#")
    if env_commit:
        return env_commit, env_project or conf_project or "", "KPERF_COMMIT_URL"
    if conf_commit not in placeholder:
        return conf_commit, conf_project, "asv.conf.json show_commit_url"
    remotes = (git(repo, "remote") or "").split()
    for name in (["origin"] if "origin" in remotes else []) + remotes:
        web = web_url_of_remote(git(repo, "remote", "get-url", name) or "")
        if web:
            project = env_project or (conf_project if conf_project not in placeholder else web)
            return commit_url_of_web(web), project, f"git remote {name}"
    return "", env_project or conf_project, "none: no KPERF_COMMIT_URL, no show_commit_url " \
                                            "in asv.conf.json, no web git remote"
