"""Small typed readers of a study file's TOML tables: each names the field it rejects,
in one ``InputError`` line, before any engine starts."""

from __future__ import annotations

import difflib

from servelab.errors import InputError


def known(table: dict, allowed: tuple[str, ...], where: str) -> None:
    for key in table:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (expected one of: {', '.join(allowed)})"
            raise InputError(f"{where}: unknown field {key!r}{hint}")


def table(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected a table, got {type(value).__name__}")
    return value


def folder_name(value, where: str) -> str:
    text = string(value, where)
    # names become folder names
    if not text or text in (".", "..") or any(c in text for c in "/\\\0") or text.startswith("."):
        raise InputError(f"{where}: {text!r} cannot be a folder name")
    return text


def _typed(value, kind: type, what: str, where: str):
    if not isinstance(value, kind):
        raise InputError(f"{where}: expected {what}, got {value!r}")
    return value


def string(value, where: str) -> str:
    return _typed(value, str, "a string", where)


def opt_string(value, where: str) -> str | None:
    return None if value is None else string(value, where)


def string_list(value, where: str) -> list[str]:
    if not isinstance(value, list):
        raise InputError(f"{where}: expected a list, got {value!r}")
    out = []
    for item in value:
        if isinstance(item, (dict, list)) or item is None:
            raise InputError(f"{where}: expected strings or numbers, got {item!r}")
        out.append(str(item).lower() if isinstance(item, bool) else str(item))
    return out


def integer(value, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{where}: expected an integer, got {value!r}")
    if value < minimum:
        raise InputError(f"{where}: must be >= {minimum}, got {value}")
    return value


def positive_number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise InputError(f"{where}: expected a positive number, got {value!r}")
    return value


def boolean(value, where: str) -> bool:
    return _typed(value, bool, "true or false", where)
