"""kperf/history/records_archive.py: the nightly keeps the per-sample records with the results,
and a truncated, corrupt or hostile archive or artifact never loses or escapes anything."""

from __future__ import annotations

import io
import json
import re
import tarfile
from pathlib import Path

import pytest

from kperf.history import records_archive as ra

M = "ci-sm_90"


def _records(root: Path, machine: str = M, n: int = 3) -> dict[str, bytes]:
    out = {}
    for i in range(n):
        rel = f"{machine}/abcdef01-env/bench_gemm.GemmTime.track_time/{i:016x}.1.{i}.json"
        data = json.dumps({"schema": "kperf-record-1", "benchmark": "b", "params": {"i": i},
                           "machine": machine, "samples": [1.0 + i]}).encode()
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
        out[rel] = data
    return out


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_pack_store_unpack_keeps_every_record(tmp_path: Path) -> None:
    written = _records(tmp_path / "runner" / ".asv" / "records")
    art = tmp_path / "incoming" / f"nightly-{M}"
    assert ra.pack(tmp_path / "runner" / ".asv" / "records", M,
                   art / "records" / M / "2026-12-01-7.tar.xz") == 3
    (art / "results" / M).mkdir(parents=True)
    (art / "results" / M / "abcdef01-env.json").write_text('{"results": {}}')
    (art / "results" / "benchmarks.json").write_text('{"version": 2}')
    branch = tmp_path / "perf-results"
    changed = ra.store(tmp_path / "incoming", branch)
    assert sorted(changed) == ["records/ci-sm_90/2026-12-01-7.tar.xz", "results/benchmarks.json",
                               "results/ci-sm_90/abcdef01-env.json"]
    n, problems = ra.unpack(branch / "records", tmp_path / "site" / "records")
    assert n == 3 and problems == []
    assert _files(tmp_path / "site" / "records") == written
    assert ra.store(tmp_path / "incoming", branch) == [
        "results/benchmarks.json", "results/ci-sm_90/abcdef01-env.json"]  # same night again


def test_pack_on_a_full_disk_leaves_no_archive(tmp_path: Path, monkeypatch) -> None:
    _records(tmp_path / "records")
    out = tmp_path / "out" / "night.tar.xz"

    def full(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tarfile.TarFile, "addfile", full)
    with pytest.raises(ra.ArchiveError, match="No space left on device"):
        ra.pack(tmp_path / "records", M, out)
    assert list(out.parent.iterdir()) == [], "a partial archive was left"


def _tar(path: Path, members: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:xz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return path


@pytest.mark.parametrize(("members", "links", "says"), [
    ({f"{M}/../../x.json": b"{}"}, None, "is not a plain name"),
    ({"/etc/x.json": b"{}"}, None, "is not a plain name"),
    ({"other-machine/a.json": b"{}"}, None, "is not under ci-sm_90/"),
    ({}, {f"{M}/a.json": "/etc/passwd"}, "is not a regular file"),
])
def test_hostile_archive_members_are_refused(tmp_path: Path, members, links, says) -> None:
    archives = tmp_path / "records"
    _tar(archives / M / "night.tar.xz", members, links)
    with pytest.raises(ra.ArchiveError, match=says):
        ra.unpack(archives, tmp_path / "dest")
    assert not [p for p in tmp_path.rglob("*") if p.name in ("x.json", "a.json")]


def test_truncated_archive_is_named_and_keep_going_unpacks_the_rest(tmp_path: Path) -> None:
    _records(tmp_path / "src", M)
    _records(tmp_path / "src", "ci-gfx942")
    archives = tmp_path / "archives"
    ra.pack(tmp_path / "src", M, archives / M / "a.tar.xz")
    ra.pack(tmp_path / "src", "ci-gfx942", archives / "ci-gfx942" / "a.tar.xz")
    bad = archives / M / "a.tar.xz"
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
    with pytest.raises(ra.ArchiveError, match=f"{bad}: .*truncated or corrupt"):
        ra.unpack(archives, tmp_path / "strict")
    assert not list((tmp_path / "strict" / M).rglob("*.json")), "half an archive was unpacked"
    n, problems = ra.unpack(archives, tmp_path / "lenient", keep_going=True)
    assert n == 3 and len(problems) == 1 and str(bad) in problems[0]
    lenient = tmp_path / "lenient"
    assert {p.relative_to(lenient).parts[0] for p in lenient.rglob("*.json")} == {"ci-gfx942"}


def test_records_are_never_overwritten(tmp_path: Path) -> None:
    _records(tmp_path / "src")
    ra.pack(tmp_path / "src", M, tmp_path / "a" / M / "n.tar.xz")
    dest = tmp_path / "dest"
    ra.unpack(tmp_path / "a", dest)
    victim = next(dest.rglob("*.json"))
    victim.write_text('{"kept": true}')
    with pytest.raises(ra.ArchiveError, match="never overwritten"):
        ra.unpack(tmp_path / "a", dest)
    assert victim.read_text() == '{"kept": true}'


def test_store_refuses_a_bad_artifact_and_never_replaces_a_night(tmp_path: Path) -> None:
    branch = tmp_path / "branch"
    (tmp_path / "secret").write_text("{}")
    for k, (rel, data, says) in enumerate((
            ("results/m/x.json", b'{"results": ', "truncated or corrupt"),
            ("elsewhere/x.json", b"{}", "is not results/<machine>/<file>.json"),
            ("results/m/link.json", None, "not a regular file"))):
        path = tmp_path / f"in-{k}" / "a" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if data is None:
            path.symlink_to(tmp_path / "secret")
        else:
            path.write_bytes(data)
        with pytest.raises((ra.ArchiveError, ValueError), match=says):
            ra.store(tmp_path / f"in-{k}", branch)
    assert not branch.exists() or not list(branch.rglob("*.json"))
    _records(tmp_path / "src")
    first = tmp_path / "first" / "a"
    ra.pack(tmp_path / "src", M, first / "records" / M / "night.tar.xz")
    ra.store(first.parent, branch)
    kept = (branch / "records" / M / "night.tar.xz").read_bytes()
    _records(tmp_path / "src2", n=1)
    second = tmp_path / "second" / "a"
    ra.pack(tmp_path / "src2", M, second / "records" / M / "night.tar.xz")
    with pytest.raises(ra.ArchiveError, match="never overwritten"):
        ra.store(second.parent, branch)
    assert (branch / "records" / M / "night.tar.xz").read_bytes() == kept


def test_check_names_bad_records(tmp_path: Path, capsys) -> None:
    archive = _tar(tmp_path / M / "n.tar.xz", {
        f"{M}/ok.json": json.dumps({"schema": "kperf-record-1", "benchmark": "b",
                                    "params": {}, "machine": M}).encode(),
        f"{M}/cut.json": b'{"schema": "kperf-rec',
        f"{M}/nan.json": b'{"schema": "kperf-record-1", "benchmark": "b", "params": {},'
                         b' "machine": "m", "samples": [NaN]}'})
    assert ra.main(["check", str(archive)]) == 1
    err = capsys.readouterr().err
    assert f"{archive}:{M}/cut.json: not valid JSON, truncated" in err
    assert f"{archive}:{M}/nan.json: not valid JSON (NaN" in err
    assert "ok.json" not in err


def test_the_codegen_runners_folders_travel_beside_the_records(tmp_path: Path) -> None:
    """The CPU codegen runner's nights keep their code figures and cold compiles beside
    the records: each folder stored and unpacked into its own, never into another's, and
    no other top folder is taken."""
    artifact = tmp_path / "incoming" / "nightly-cpu-codegen"
    written = {}
    for folder in ra.RECORD_FOLDERS:
        written[folder] = _records(tmp_path / "asv" / folder, n=2)
        ra.pack(tmp_path / "asv" / folder, M, artifact / folder / M / "night.tar.xz")
    branch = tmp_path / "branch"
    changed = ra.store(tmp_path / "incoming", branch)
    assert sorted(changed) == sorted(f"{f}/{M}/night.tar.xz" for f in ra.RECORD_FOLDERS)
    for folder in ra.RECORD_FOLDERS:
        ra.unpack(branch / folder, tmp_path / "site" / folder)
        assert _files(tmp_path / "site" / folder) == written[folder], folder
    stray = tmp_path / "stray" / "a" / "notes" / M / "night.tar.xz"
    stray.parent.mkdir(parents=True)
    stray.write_bytes((artifact / "records" / M / "night.tar.xz").read_bytes())
    with pytest.raises(ra.ArchiveError, match=r"records,codegen-records,compile-records"):
        ra.store(tmp_path / "stray", branch)


def test_a_night_packs_its_own_records_not_those_it_began_from(tmp_path: Path) -> None:
    """The CPU codegen runner starts from earlier nights' compile records (so it times a
    compile again only where it changed); its archive holds what it wrote itself."""
    import os
    import tarfile
    import time

    root = tmp_path / "compile-records"
    earlier = _records(root, n=3)
    for rel in earlier:  # unpacked from earlier nights: their own (older) times
        os.utime(root / rel, (1.0e9, 1.0e9))
    started = time.time()
    rel = f"{M}/fedcba09-env/bench_gemm.GemmCompile.track_compile/{9:016x}.1.9.json"
    (root / rel).parent.mkdir(parents=True)
    (root / rel).write_text('{"kind": "compile"}')
    out = tmp_path / "night" / M / "n.tar.xz"
    assert ra.pack(root, M, out, since=started) == 1
    with tarfile.open(out) as tar:
        assert tar.getnames() == [rel]
    assert ra.pack(root, M, tmp_path / "all" / M / "n.tar.xz") == 4  # since 0: every file


def test_store_keeps_a_nights_upgrade_report_and_refuses_anything_else_there(
        tmp_path: Path) -> None:
    """The nightly's upgrade report (kperf upgrade --newest) goes to upgrade/<night>/ of the
    results branch, gate.json whole; nothing else under upgrade/ is taken."""
    branch = tmp_path / "branch"
    night = tmp_path / "in" / "nightly-cpu-codegen" / "upgrade" / "2026-12-07-1-1"
    night.mkdir(parents=True)
    (night / "gate.json").write_text(json.dumps({"schema": "kperf-gate-2", "cases": []}))
    (night / "gate.md").write_text("### Before you upgrade\n")
    assert sorted(ra.store(tmp_path / "in", branch)) == [
        "upgrade/2026-12-07-1-1/gate.json", "upgrade/2026-12-07-1-1/gate.md"]
    for k, (name, text, says) in enumerate((
            ("gate.json", '{"cases": [', "truncated or corrupt"),
            ("rounds.md", "x", "or upgrade/<night>/gate.{json,md}"))):
        bad = tmp_path / f"bad-{k}" / "a" / "upgrade" / "n" / name
        bad.parent.mkdir(parents=True)
        bad.write_text(text)
        with pytest.raises((ra.ArchiveError, ValueError), match=re.escape(says)):
            ra.store(tmp_path / f"bad-{k}", branch)
