"""kperf/config.py and kperf/paths.py: configuration checked by a real JSON Schema validator,
errors that name the file and the field, names that cannot leave their root."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kperf import config, paths
from kperf.project import DEFAULTS


def test_every_schema_is_valid_draft_2020_12_and_loads() -> None:
    from jsonschema import Draft202012Validator

    assert set(config.schema_names()) >= {"machine-file", "site-probe", "stack-probe",
                                          "record"}
    for path in sorted(config.SCHEMA_DIR.glob("*.json")):
        Draft202012Validator.check_schema(json.loads(path.read_text()))
    for name in config.schema_names():
        config._validator(name)  # resolves every $ref to common.json


def test_schema_and_code_agree_on_a_safe_name() -> None:
    common = json.loads((config.SCHEMA_DIR / "common.json").read_text())
    assert common["$defs"]["safe_name"]["pattern"] == f"^{paths.SAFE_NAME.pattern}$"
    assert common["$defs"]["safe_name"]["maxLength"] == paths.MAX_NAME


@pytest.mark.parametrize("name", ["..", ".", "../x", "a/b", "/abs", "-rf", ".hidden", "", "a\nb",
                                  "x" * 201, "a\\b"])
def test_unsafe_names_are_refused_by_both(name: str, tmp_path: Path) -> None:
    with pytest.raises(paths.PathError, match="is not a plain name"):
        paths.safe_name(name, "machine name", "machine.json")
    data = {"version": 1, "ok": {"machine": name}}
    with pytest.raises(config.ConfigError, match=r"field /ok/machine: "):
        config.validate(data, "machine-file", tmp_path / "m.json")


def test_inside_refuses_a_link_that_leads_out(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(tmp_path)
    assert paths.inside(root, "ok-1.2", what="machine") == root / "ok-1.2"
    with pytest.raises(paths.PathError, match="leads outside"):
        paths.inside(root, "link", what="machine")


def test_load_json_names_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "asv-machine.json"
    path.write_text(json.dumps({"version": 1, "h200": {"machine": "h200", "ram": [64]}}))
    with pytest.raises(config.ConfigError) as err:
        config.load_json(path, "machine-file")
    assert str(err.value) == f"{path}: field /h200/ram: [64] is not of type 'string', " \
        "'number', 'boolean', 'null'"
    assert err.value.pointer == "/h200/ram" and err.value.source == str(path)


@pytest.mark.parametrize(("field", "value"), [("min_rounds", 3.0), ("max_rounds", 8.0),
                                              ("trials_per_block", True)])
def test_a_float_or_boolean_where_an_integer_is_due_is_refused(tmp_path: Path, field: str,
                                                              value: object) -> None:
    """JSON Schema counts 3.0 as an integer; the gate would then carry a float into
    ``range()`` and fail later with a bare TypeError naming no file (issue 27)."""
    from kperf.gate.config import Thresholds

    raw = json.loads((DEFAULTS / "thresholds.json").read_text())
    raw["sequential"][field] = value
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(config.ConfigError) as err:
        Thresholds.load(path)
    assert str(err.value).startswith(f"{path}: field /sequential/{field}: "), err.value
    assert "integer" in str(err.value)


@pytest.mark.parametrize(("text", "says"), [
    ("", "empty file"),
    ('{"version": 1, "m": {"machine": "m"', "truncated or corrupt"),
    ('{"version": 1, "version": 1}', "duplicate key 'version'"),
    ('{"version": 1, "m": {"machine": "m", "ram": Infinity}}', "Infinity is not a number"),
    ('{"version": 1, "m": {"machine": "m", "ram": 1e999}}', "field /m/ram: inf is not a finite"),
])
def test_truncated_and_corrupt_files(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "m.json"
    path.write_text(text)
    with pytest.raises(config.ConfigError, match=re.escape(f"{path}: ") + ".*" + re.escape(says)):
        config.load_json(path, "machine-file")


def test_unreadable_missing_and_binary(tmp_path: Path) -> None:
    with pytest.raises(config.ConfigError, match="not found"):
        config.load_json(tmp_path / "none.json", "machine-file")
    assert config.load_json(tmp_path / "none.json", "machine-file", missing_ok=True) is None
    (tmp_path / "bin.json").write_bytes(b'{"a": "\xff\xfe"}')
    with pytest.raises(config.ConfigError, match="not UTF-8"):
        config.load_json(tmp_path / "bin.json", "machine-file")
    with pytest.raises(config.ConfigError, match="is a directory"):
        config.load_json(tmp_path, "machine-file")


def test_scratch_is_removed_only_when_it_is_the_tools_own(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    keep = paths.kept_paths(repo, {"results_dir": ".asv/results", "html_dir": "html"})
    for label, kept in keep.items():  # the scratch is, holds, or lies in what is kept
        for candidate in (kept, kept.parent, kept / "sub"):
            with pytest.raises(paths.PathError, match="overlaps the ") as err:
                paths.remove_scratch(candidate, keep)
            assert candidate != kept or label in str(err.value)
    with pytest.raises(paths.PathError, match="is or holds"):
        paths.remove_scratch(tmp_path, {}, not_above=[repo])
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("x")
    with pytest.raises(paths.PathError, match="was not made by this tool"):
        paths.remove_scratch(foreign, keep)
    assert (foreign / "precious.txt").exists()
    mine = paths.make_scratch(repo / ".asv" / "pr-results", keep, not_above=[repo])
    (mine / "round-01").mkdir()
    paths.remove_scratch(mine, keep, not_above=[repo])
    assert not mine.exists()
    link = tmp_path / "link"
    link.symlink_to(foreign)
    with pytest.raises(paths.PathError, match="symbolic link"):
        paths.remove_scratch(link, keep)
