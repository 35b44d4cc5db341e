"""tools/wheelhouse.py: parts under the size limit, a truthful manifest, a lossless restore."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tarfile
from pathlib import Path

import pytest

from tools import wheelhouse as wh

KIB = 1024


def _fake_wheels(folder: Path, sizes: dict[str, int]) -> dict[str, bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, size in sizes.items():
        data = os.urandom(size)
        (folder / name).write_bytes(data)
        out[name] = data
    return out


SIZES = {
    # a long name (> 100 characters) needs a PAX header in the tar
    "triton-3.8.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.longer-name-for-pax.whl":
        300 * KIB,  # larger than a part: chunked
    "tilelang-0.1.15-cp39-abi3-manylinux_2_27_x86_64.whl": 90 * KIB,
    "apache_tvm_ffi-0.1.12-cp312-abi3-manylinux_2_28_x86_64.whl": 40 * KIB,
    "asv_runner-0.3.2-py3-none-any.whl": 30 * KIB,
    "pympler-1.1-py3-none-any.whl": 20 * KIB,
    "json5-0.17.3-py3-none-any.whl": 5 * KIB,
}
PART = 128 * KIB


def test_parts_stay_under_the_limit_and_restore_is_exact(tmp_path: Path) -> None:
    originals = _fake_wheels(tmp_path / "wheels", SIZES)
    manifest = wh.split(tmp_path / "wheels", tmp_path / "parts", PART)

    part_files = sorted((tmp_path / "parts").glob("part-*.tar"))
    assert [p["name"] for p in manifest["parts"]] == [p.name for p in part_files]
    for path in part_files:
        assert path.stat().st_size <= PART, path
        with tarfile.open(path) as tar:
            assert all(m.isfile() for m in tar.getmembers())

    # every wheel listed once, with its real digest and the parts that hold it
    listed = {w["name"]: w for w in manifest["wheels"]}
    assert set(listed) == set(SIZES)
    for name, data in originals.items():
        assert listed[name]["sha256"] == hashlib.sha256(data).hexdigest()
        assert listed[name]["bytes"] == len(data)
        for part in listed[name]["parts"]:
            members = next(p["members"] for p in manifest["parts"] if p["name"] == part)
            assert any(m.startswith(name) for m in members)
    big = listed[next(iter(SIZES))]
    assert len(big["chunks"]) == 3 and len(big["parts"]) == 3  # 300 KiB in < 128 KiB pieces
    assert all(not w["chunks"] for n, w in listed.items() if n != big["name"])

    # first-fit decreasing fills the chunk parts' leftover space: 3 chunk parts, and the
    # 185 KiB of small wheels need at most 2 more
    assert len(part_files) <= 5
    on_disk = json.loads((tmp_path / "parts" / "manifest.json").read_text())
    assert on_disk == manifest

    restored = wh.restore(tmp_path / "parts", tmp_path / "restored")
    assert sorted(p.name for p in restored) == sorted(SIZES)
    for name, data in originals.items():
        assert (tmp_path / "restored" / name).read_bytes() == data
    assert sorted(p.name for p in (tmp_path / "restored").iterdir()) == sorted(SIZES), \
        "restore left chunks or staging files behind"


def test_restore_refuses_a_corrupt_part(tmp_path: Path) -> None:
    _fake_wheels(tmp_path / "wheels", {"a-1.0-py3-none-any.whl": 10 * KIB})
    wh.split(tmp_path / "wheels", tmp_path / "parts", PART)
    part = tmp_path / "parts" / "part-001.tar"
    data = bytearray(part.read_bytes())
    data[600] ^= 0xFF
    part.write_bytes(bytes(data))
    with pytest.raises(wh.WheelhouseError, match=r"part-001\.tar: sha256 differs"):
        wh.restore(tmp_path / "parts", tmp_path / "restored")


def test_split_errors_name_the_problem(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(wh.WheelhouseError, match=r"no \.whl files"):
        wh.split(tmp_path / "empty", tmp_path / "parts", PART)
    _fake_wheels(tmp_path / "wheels", {"a-1.0-py3-none-any.whl": KIB})
    with pytest.raises(wh.WheelhouseError, match="too small"):
        wh.split(tmp_path / "wheels", tmp_path / "parts", 4 * KIB)


@pytest.mark.parametrize(("text", "size"), [("60MiB", 60 << 20), ("500MB", 500 * 10**6),
                                            ("1048576", 1 << 20), ("2 GiB", 2 << 30)])
def test_part_size_units(text: str, size: int) -> None:
    assert wh.parse_size(text) == size


def test_part_size_rejects_nonsense() -> None:
    with pytest.raises(wh.WheelhouseError, match="--part-size '60 potatoes'"):
        wh.parse_size("60 potatoes")


def test_pip_download_command_targets_the_runner(tmp_path: Path) -> None:
    cmd = wh.pip_download_command(["triton==3.3.1", "tilelang==0.1.15"], tmp_path / "dl",
                                  ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64"], "3.12",
                                  abi="cp312", python="/py")
    assert cmd == ["/py", "-m", "pip", "download", "--only-binary=:all:",
                   "--dest", str(tmp_path / "dl"),
                   "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_27_x86_64",
                   "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312",
                   "triton==3.3.1", "tilelang==0.1.15"]


def test_pip_download_command_without_dependencies(tmp_path: Path) -> None:
    cmd = wh.pip_download_command(["tilelang==0.1.15"], tmp_path, ["manylinux_2_28_x86_64"],
                                  "3.12", python="/py", no_deps=True)
    assert cmd[-2:] == ["--no-deps", "tilelang==0.1.15"]
    assert "--only-binary=:all:" in cmd


def test_pip_download_command_needs_platform_and_version(tmp_path: Path) -> None:
    with pytest.raises(wh.WheelhouseError, match="--platform"):
        wh.pip_download_command(["x"], tmp_path, [], "3.12")
    with pytest.raises(wh.WheelhouseError, match="--python-version 'py3'"):
        wh.pip_download_command(["x"], tmp_path, ["any"], "py3")
    with pytest.raises(wh.WheelhouseError, match="no requirements"):
        wh.pip_download_command([], tmp_path, ["any"], "3.12")


def test_build_dry_run_prints_the_command_with_requirements_file(tmp_path: Path,
                                                                  capsys) -> None:
    reqs = tmp_path / "reqs.txt"
    reqs.write_text("# the air-gapped stack\ntriton==3.3.1  # pinned\n\nasv==0.6.6\n")
    code = wh.main(["build", "-r", str(reqs), "--platform", "manylinux_2_28_x86_64",
                    "--python-version", "3.10", "--out", str(tmp_path / "out"), "--dry-run"])
    printed = capsys.readouterr().out
    assert code == 0
    assert f"{sys.executable} -m pip download --only-binary=:all:" in printed
    assert printed.rstrip().endswith("--implementation cp triton==3.3.1 asv==0.6.6")
    assert not (tmp_path / "out").exists(), "a dry run must not write parts"
