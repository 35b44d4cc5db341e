"""Validated configuration: every JSON file a tool reads is checked against a schema.

    from kperf.config import ConfigError, load_json
    machines = load_json(Path.home() / ".asv-machine.json", "machine-file")

The schemas are JSON Schema (draft 2020-12) files in ``kperf/schemas/<name>.json``, checked
with the ``jsonschema`` package; they share definitions through ``common.json`` (safe file
and machine names, sha256 digests). Every failure is a ``ConfigError`` (a ``ValueError``)
whose message names the file and the field as a JSON pointer, e.g.::

    /root/.asv-machine.json: field /h200/ram: [64] is not of type 'string', 'number',
    'boolean', 'null'

Unreadable, empty, truncated or non-UTF-8 files, NaN / Infinity and duplicate keys are
errors too, named the same way. ``"type": "integer"`` means a JSON integer: ``3.0``, which
JSON Schema itself would accept, is refused (Python would carry it on as a float).
``validate`` checks data that did not come from a file (a child process's answer), with
``source`` naming where it came from.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
BASE_URI = "https://kperf.invalid/schemas/"


class ConfigError(ValueError):
    """A configuration file (or a machine's answer) that is missing, unreadable or invalid."""

    def __init__(self, source: str | Path, message: str, pointer: str | None = None) -> None:
        self.source = str(source)
        self.pointer = pointer
        self.reason = message
        where = f"{self.source}: field {pointer or '(top level)'}: " if pointer is not None \
            else f"{self.source}: "
        super().__init__(where + message)


def json_pointer(parts: Iterable[Any]) -> str:
    """RFC 6901: ``['wheels', 0, 'name']`` -> ``/wheels/0/name``."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


@cache
def _registry() -> Any:
    from referencing import Registry, Resource

    resources = []
    for path in sorted(SCHEMA_DIR.glob("*.json")):
        contents = json.loads(path.read_text())
        resources.append((contents["$id"], Resource.from_contents(contents)))
    return Registry().with_resources(resources)


def _is_integer(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


@cache
def _validator_class() -> Any:
    from jsonschema import Draft202012Validator, validators

    checker = Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer)
    return validators.extend(Draft202012Validator, type_checker=checker)


@cache
def _validator(name: str) -> Any:
    from jsonschema import Draft202012Validator

    path = SCHEMA_DIR / f"{name}.json"
    if not path.exists():
        known = sorted(p.stem for p in SCHEMA_DIR.glob("*.json"))
        raise KeyError(f"no schema {name!r} in {SCHEMA_DIR}; known: {known}")
    schema = json.loads(path.read_text())
    Draft202012Validator.check_schema(schema)
    return _validator_class()(schema, registry=_registry())


def schema_names() -> list[str]:
    return sorted(p.stem for p in SCHEMA_DIR.glob("*.json") if p.stem != "common")


def _message(error: Any) -> str:
    expect = _expectation(error)
    if expect and error.validator in ("pattern", "type", "maxLength", "minLength", "const"):
        return f"{error.instance!r} is not {expect}"
    return error.message


def _expectation(error: Any) -> str | None:
    """The ``x-expect`` wording of the innermost schema that says what was wanted."""
    schema = error.schema if isinstance(error.schema, dict) else {}
    return schema.get("x-expect")


def validate(data: Any, schema_name: str, source: str | Path) -> Any:
    """``data`` if it matches ``kperf/schemas/<schema_name>.json``, else ``ConfigError``."""
    from jsonschema.exceptions import relevance

    errors = sorted(_validator(schema_name).iter_errors(data), key=relevance)
    if not errors:
        return data
    # the deepest (most specific) error first: it names the field that is wrong
    error = max(errors, key=lambda e: (len(e.absolute_path), -errors.index(e)))
    if error.context:  # anyOf / oneOf: the branch that got furthest says the most
        error = max(error.context, key=lambda e: len(e.absolute_path))
    return _raise(source, json_pointer(error.absolute_path), _message(error))


def _raise(source: str | Path, pointer: str, message: str) -> Any:
    raise ConfigError(source, message, pointer)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def parse_json(text: str, source: str | Path) -> Any:
    """Strict JSON: no NaN / Infinity, no duplicate keys; errors name ``source``."""
    if not text.strip():
        raise ConfigError(source, "empty file (truncated?)")
    try:
        data = json.loads(text, parse_constant=_reject_constant,
                          object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as err:
        raise ConfigError(source, f"not valid JSON, truncated or corrupt ({err.msg} at line "
                                  f"{err.lineno} column {err.colno})") from err
    except (ValueError, RecursionError) as err:
        raise ConfigError(source, f"not valid JSON ({err})") from err
    _check_finite(data, source, [])
    return data


def _check_finite(data: Any, source: str | Path, where: list[Any]) -> None:
    # large exponents (1e999) parse to inf without going through parse_constant
    if isinstance(data, float) and not math.isfinite(data):
        _raise(source, json_pointer(where), f"{data} is not a finite number")
    elif isinstance(data, dict):
        for key, value in data.items():
            _check_finite(value, source, [*where, key])
    elif isinstance(data, list):
        for index, value in enumerate(data):
            _check_finite(value, source, [*where, index])


def read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError as err:
        raise ConfigError(path, "not found") from err
    except IsADirectoryError as err:
        raise ConfigError(path, "is a directory, not a file") from err
    except UnicodeDecodeError as err:
        raise ConfigError(path, f"not UTF-8 text (corrupt?) at byte {err.start}") from err
    except OSError as err:
        raise ConfigError(path, f"cannot read ({err.strerror or err})") from err


def load_json(path: str | Path, schema_name: str, missing_ok: bool = False) -> Any:
    """The parsed, validated content of ``path``; ``None`` if missing and ``missing_ok``."""
    path = Path(path)
    if missing_ok and not path.exists() and not path.is_symlink():
        return None
    return validate(parse_json(read_text(path), path), schema_name, path)
