"""Invalid UTF-8 is reported at the line and column the format's reader would use.

YAML readers end lines at CRLF, CR, LF, NEL, LS and PS; the markdown reader numbers lines
as :meth:`str.splitlines` does (also VT, FF, FS, GS, RS). The files are written byte for
byte, and each bad-byte position is checked against the position the same reader reports
for a different error (a control character) at that very spot.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deputy_runtime.definitions import agent_definition_from_markdown, agent_definition_read
from deputy_runtime.definitions._files import decode_definition_bytes
from deputy_runtime.errors import DefinitionFileError
from tests.definitions._definition_helpers import MIN

BAD = b"\xff"
CONTROL = b"\x01"  # not allowed in YAML: a located error of the reader itself
YAML_ENDINGS = {"LF": b"\n", "CRLF": b"\r\n", "CR": b"\r", "NEL": "\x85".encode()}
MARKDOWN_ENDINGS = {**YAML_ENDINGS, "VT": b"\x0b", "FF": b"\x0c", "LS": "\u2028".encode()}


def _yaml_file(end: bytes, marker: bytes) -> bytes:
    lines = [*MIN.encode().splitlines(), b"memory:", b"- one", b"- ab" + marker + b"cd"]
    return end.join(lines) + end


def _markdown_file(end: bytes, marker: bytes) -> bytes:
    lines = [b"---", b"name: a", b"description: d", b"model: m" + marker, b"---", b"body"]
    return end.join(lines) + end


def _error(read: object, path: Path, data: bytes) -> DefinitionFileError:
    path.write_bytes(data)
    with pytest.raises(DefinitionFileError) as info:
        read(path)  # type: ignore[operator]
    return info.value


@pytest.mark.parametrize("ending", YAML_ENDINGS)
def test_yaml_line_and_column(tmp_path: Path, ending: str) -> None:
    end = YAML_ENDINGS[ending]
    bad = _error(agent_definition_read, tmp_path / "a.yaml", _yaml_file(end, BAD))
    assert (bad.line, bad.column) == (7, 5)
    assert "byte 0xFF" in bad.reason
    control = _error(agent_definition_read, tmp_path / "b.yaml", _yaml_file(end, CONTROL))
    assert "U+0001" in control.reason
    assert (control.line, control.column) == (bad.line, bad.column)


@pytest.mark.parametrize("ending", MARKDOWN_ENDINGS)
def test_markdown_line_and_column(tmp_path: Path, ending: str) -> None:
    end = MARKDOWN_ENDINGS[ending]
    read = agent_definition_from_markdown
    bad = _error(read, tmp_path / "a.md", _markdown_file(end, BAD))
    assert (bad.line, bad.column) == (4, 9)
    control = _error(read, tmp_path / "b.md", _markdown_file(end, CONTROL))
    assert "U+0001" in control.reason
    assert (control.line, control.column) == (bad.line, bad.column)


def test_bad_byte_in_the_body_of_a_cr_only_file(tmp_path: Path) -> None:
    data = b"---\rname: a\rdescription: d\r---\rline five\rsix \xe9\r"
    error = _error(agent_definition_from_markdown, tmp_path / "a.md", data)
    assert (error.line, error.column) == (6, 5)


@pytest.mark.parametrize(
    ("data", "markdown", "where"),
    [
        (b"ab\r\n\r\ncd\xff", False, (3, 3)),  # CRLF is one line end, not two
        (b"ab\r\rcd\xff", False, (3, 3)),
        (b"ab\n\rcd\xff", False, (3, 3)),  # LF then CR: two line ends
        (b"a\x0bb\xff", False, (1, 4)),  # VT ends no YAML line
        (b"a\x0bb\xff", True, (2, 2)),  # but a markdown line
        (b"\xef\xbb\xbfab\r\xc3\xa9\xff", True, (2, 2)),  # BOM dropped; columns in characters
        (b"\xff", False, (1, 1)),
        (b"ab\r", False, None),  # valid: decoded as is
    ],
)
def test_decode_positions(data: bytes, markdown: bool, where: tuple[int, int] | None) -> None:
    if where is None:
        assert decode_definition_bytes(data, Path("x"), markdown=markdown) == "ab\r"
        return
    with pytest.raises(DefinitionFileError) as info:
        decode_definition_bytes(data, Path("x"), markdown=markdown)
    assert (info.value.line, info.value.column) == where
