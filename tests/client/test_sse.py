from servelab.client.sse import Event, parse_events


def test_events_split_across_reads_take_time_of_terminating_read():
    pieces = [(10, b'data: {"a"'), (20, b': 1}\n'), (30, b"\ndata: x\n\n")]
    assert parse_events(pieces) == [Event(30, '{"a": 1}'), Event(30, "x")]


def test_event_complete_in_first_read_keeps_its_time():
    pieces = [(5, b"data: one\n\ndata: tw"), (9, b"o\n\n")]
    assert parse_events(pieces) == [Event(5, "one"), Event(9, "two")]


def test_comments_and_event_without_data_are_ignored():
    pieces = [(1, b": ping\n\nevent: foo\n\ndata: real\n\n")]
    assert parse_events(pieces) == [Event(1, "real")]


def test_crlf_and_cr_line_endings():
    pieces = [(1, b"data: a\r\n\r\ndata: b\r\r")]
    assert [e.data for e in parse_events(pieces)] == ["a", "b"]


def test_crlf_split_between_reads_is_not_a_blank_line():
    # "\r" | "\n" split across reads must count as one line end, not two
    pieces = [(1, b"data: a\r"), (2, b"\ndata: b\r\n\r\n")]
    assert parse_events(pieces) == [Event(2, "a\nb")]


def test_multiline_data_joined_and_single_space_stripped():
    pieces = [(1, b"data:x\ndata:  y\n\n")]
    assert parse_events(pieces) == [Event(1, "x\n y")]


def test_done_marker_and_unterminated_final_event():
    pieces = [(1, b"data: [DONE]\n\n"), (2, b"data: tail")]
    assert parse_events(pieces) == [Event(1, "[DONE]"), Event(2, "tail")]


def test_utf8_split_across_reads():
    raw = "data: é\n\n".encode()
    pieces = [(1, raw[:7]), (2, raw[7:])]
    assert parse_events(pieces) == [Event(2, "é")]
