"""servelab/datasets/files.py: JSON lists (truncation-tolerant) and JSONL, errors at line:col."""

from __future__ import annotations

import json
import re

import pytest

from servelab.datasets import files
from servelab.datasets.files import iter_json_list, load_json_list, load_jsonl
from servelab.errors import DatasetError

RECORDS = [{"id": "a", "n": 1}, {"id": "b", "n": True}, {"id": "c", "text": "x, y"}]
FULL = json.dumps(RECORDS, indent=2)


def write(tmp_path, text, name="data.json"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_valid_list_loads_without_warning(tmp_path, capsys):
    assert load_json_list(write(tmp_path, FULL)) == RECORDS
    assert load_json_list(write(tmp_path, " [ ] \n")) == []
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("cut_after", "complete"),
    [
        ('"text": "x,', 2),  # EOF inside a string
        ('"text": "x, y"', 2),  # EOF inside an object
        ('"n": tru', 1),  # EOF inside a keyword (record b)
        ('"n": true\n  },', 2),  # EOF after a comma: the list never closes
        ('"text": "x, y"\n  }', 3),  # EOF right after the last record
    ],
)
def test_a_list_truncated_at_the_end_keeps_its_complete_records(tmp_path, capsys, cut_after, complete):
    path = write(tmp_path, FULL[: FULL.index(cut_after) + len(cut_after)])
    assert load_json_list(path) == RECORDS[:complete]
    assert capsys.readouterr().err == (
        f"servelab: warning: {path} ends in the middle of a record (truncated file); "
        f"loaded its {complete} complete records\n"
    )


def test_malformed_json_in_the_middle_names_line_and_column(tmp_path):
    text = '[\n  {"id": "a"},\n  {"id": "b" "n": 2},\n  {"id": "c"}\n]'
    path = write(tmp_path, text)
    with pytest.raises(DatasetError) as err:
        load_json_list(path)
    # Line 3, column 14 is the '"' of "n", where a ',' was expected.
    assert str(err.value) == f"{path}:3:14: invalid JSON: Expecting ',' delimiter"


def test_missing_comma_between_records_names_line_and_column(tmp_path):
    path = write(tmp_path, '[\n {"id": "a"}\n {"id": "b"}\n]')
    with pytest.raises(DatasetError, match=rf"^{path}:3:2: invalid JSON: expected ',' or '\]' after a record$"):
        load_json_list(path)


def test_extra_data_after_the_list_is_an_error(tmp_path):
    path = write(tmp_path, '[{"id": "a"}]\n{"id": "b"}')
    with pytest.raises(DatasetError, match=f"^{path}:2:1: invalid JSON: extra data after the list$"):
        load_json_list(path)


def test_not_a_list(tmp_path):
    path = write(tmp_path, '\n {"id": "a"}')
    with pytest.raises(DatasetError, match=rf"^{path}:2:2: expected a JSON list \('\['\)$"):
        load_json_list(path)


def test_missing_file_names_the_path_and_the_flag(tmp_path):
    with pytest.raises(DatasetError, match=f"dataset file not found: {tmp_path / 'nope.json'} \\(--dataset-path\\)"):
        load_json_list(tmp_path / "nope.json")


def test_jsonl_keeps_line_numbers_and_skips_blank_lines(tmp_path):
    path = write(tmp_path, '{"prompt": "a"}\n\n  \n{"prompt": "b"}\n', "d.jsonl")
    assert load_jsonl(path) == [(1, {"prompt": "a"}), (4, {"prompt": "b"})]


def test_malformed_jsonl_names_line_and_column(tmp_path):
    path = write(tmp_path, '{"prompt": "a"}\n{"prompt": "b",}\n', "d.jsonl")
    with pytest.raises(DatasetError) as err:
        load_jsonl(path)
    assert str(err.value) == f"{path}:2:16: invalid JSON: Expecting property name enclosed in double quotes"


WINDOWED = [FULL, " [ ] \n", "[]", json.dumps([{"t": "é ✓ 𝄞 " * 5, "k": i} for i in range(6)], ensure_ascii=False),
            *(FULL[: FULL.index(cut) + len(cut)] for cut in ('"text": "x,', '"n": tru', '"n": true\n  },', '"x, y"\n  }')),
            '[\n  {"id": "a"},\n  {"id": "b" "n": 2},\n  {"id": "c"}\n]', '[\n {"id": "a"}\n {"id": "b"}\n]',
            '[{"id": "a"}]\n{"id": "b"}', '\n {"id": "a"}']


@pytest.mark.parametrize("window", [1, 3, 7, 1 << 20])
@pytest.mark.parametrize("text", WINDOWED)
def test_records_one_at_a_time_are_the_whole_files_with_the_same_notes_and_errors(tmp_path, capsys, monkeypatch,
                                                                                   text, window):
    from servelab.datasets import notes

    path = write(tmp_path, text)
    monkeypatch.setattr(files, "WINDOW", window)
    try:
        whole = load_json_list(path)
    except DatasetError as exc:
        with pytest.raises(DatasetError, match=f"^{re.escape(str(exc))}$"):
            list(iter_json_list(path))
        return
    said = capsys.readouterr().err
    notes._said.clear()
    assert list(iter_json_list(path)) == whole and capsys.readouterr().err == said
