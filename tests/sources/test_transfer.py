"""The pieces every request goes through: the deadline, the capped decoder, and the one
redactor of headers and URLs."""

from __future__ import annotations

import gzip
import threading
import zlib

import pytest

from gpuaudit.core.errors import ConfigError
from gpuaudit.core.redact import header_secrets, redact_headers, scrub, url_for_display, url_secrets
from gpuaudit.sources.collect import parse_headers
from gpuaudit.sources.prometheus.http import _warnings
from gpuaudit.sources.transfer import (
    AnswerTooLarge,
    BadEncoding,
    Deadline,
    DeadlineExceeded,
    read_body,
    within,
)

DATA = b'{"status":"success"}' * 500


def test_read_body_decodes_what_was_asked_for_and_refuses_the_rest() -> None:
    g = gzip.compress(DATA)
    assert read_body([g[i : i + 7] for i in range(0, len(g), 7)], "gzip", 10**6) == DATA
    assert read_body([g + g], "gzip", 10**6) == DATA + DATA  # members one after another
    assert read_body([zlib.compress(DATA)], "deflate", 10**6) == DATA
    assert read_body([DATA[:5], DATA[5:]], "identity", 10**6) == DATA
    with pytest.raises(AnswerTooLarge, match="larger than 100 bytes"):
        read_body([g], "gzip", 100)
    with pytest.raises(AnswerTooLarge):
        read_body([DATA], "", 100)
    with pytest.raises(BadEncoding, match="truncated"):
        read_body([g[:-20]], "gzip", 10**6)
    with pytest.raises(BadEncoding, match="corrupt"):
        read_body([b"not gzip at all"], "gzip", 10**6)
    with pytest.raises(BadEncoding, match="'br'"):
        read_body([b"x"], "br", 10**6)


def test_within_returns_raises_and_stops_waiting() -> None:
    assert within(5, lambda d: 42) == 42
    with pytest.raises(ZeroDivisionError):
        within(5, lambda d: 1 // 0)
    release = threading.Event()
    seen: list[bool] = []

    def stuck(deadline: Deadline) -> None:
        release.wait(10)
        seen.append(deadline.abandoned.is_set())

    with pytest.raises(DeadlineExceeded, match="within 0.2 s"):
        within(0.2, stuck)
    release.set()
    # The abandoned request is told so, and stops at its next check.
    for _ in range(200):
        if seen:
            break
        threading.Event().wait(0.01)
    assert seen == [True]


def test_only_harmless_header_values_are_logged() -> None:
    shown = redact_headers(
        {
            "Accept": "application/json",
            "User-Agent": "gpuaudit/x",
            "Authorization": "Bearer t",
            "X-Auth-Token": "a",
            "Api-Key": "b",
            "PRIVATE-TOKEN": "c",
            "X-Scope-OrgID": "tenant",
        }
    )
    assert shown["Accept"] == "application/json" and shown["User-Agent"] == "gpuaudit/x"
    for name in ("Authorization", "X-Auth-Token", "Api-Key", "PRIVATE-TOKEN", "X-Scope-OrgID"):
        assert shown[name] == "<redacted>"


def test_secrets_of_urls_and_headers_are_scrubbed_from_messages() -> None:
    url = "https://user:pa55word@h.example/prom/?access_token=tok-123456&x=1"
    assert url_for_display(url) == "https://h.example/prom/"
    secrets = url_secrets(url) + header_secrets({"Authorization": "Bearer abcdef123456"})
    text = scrub("failed: pa55word tok-123456, the Bearer token abcdef123456 (user)", secrets)
    assert "pa55word" not in text and "tok-123456" not in text and "abcdef123456" not in text
    assert "Bearer" in text  # the scheme is no secret


@pytest.mark.parametrize(
    "raw",
    [
        "Authorization=Bearer sekrit-value",
        "Bearer sekrit-value",
        "Authorization Bearer: sekrit-value",
        "X-Token: sekrit\nvalue",
        "X-Token: sekrit\x00value",
    ],
)
def test_a_header_that_cannot_be_read_is_an_error_without_its_value(raw: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_headers((raw,))
    assert "sekrit" not in str(info.value) and "\n" not in str(info.value)


def test_header_values_lose_the_space_and_line_breaks_around_them() -> None:
    assert parse_headers(("X-Scope-OrgID:  t1 \r", "", "Authorization:Bearer a b")) == {
        "X-Scope-OrgID": "t1",
        "Authorization": "Bearer a b",
    }


def test_warnings_are_a_bounded_list_of_texts() -> None:
    assert _warnings("one text") == ["one text"]
    assert _warnings(None) == []
    assert _warnings({"a": 1}) == ["unreadable warnings field (dict)"]
    many = _warnings([f"w{i}" for i in range(1000)])
    assert len(many) == 21 and many[-1] == "... and 980 more warnings"
    assert len(_warnings(["x" * 10_000])[0]) == 500
