"""The import readers (lev/imports): a bookmark export's nested folders flatten to `Parent / Child`, a CSV's rows
become links, and a file that cannot be read is refused naming its line."""

from __future__ import annotations

import pytest

from lev.core.errors import ApiError
from lev.imports.bookmarks import parse

NETSCAPE = b"""<!DOCTYPE NETSCAPE-Bookmark-file-1>
<DL><p>
  <DT><H3>Reading</H3>
  <DL><p>
    <DT><H3>Science</H3>
    <DL><p>
      <DT><A HREF="https://example.org/volcano" TAGS="geo">Volcanoes</A>
    </DL><p>
  </DL><p>
  <DT><A HREF="javascript:alert(1)">Bookmarklet</A>
</DL><p>
"""


def test_bookmark_folders_flatten_and_odd_links_are_skipped() -> None:
    parsed = parse(NETSCAPE)
    assert [link.url for link in parsed.links] == ["https://example.org/volcano"]
    assert "Reading / Science" in parsed.folders.values()
    assert parsed.skipped and "javascript" in str(parsed.skipped[0]).lower()


def test_csv_rows_become_links() -> None:
    parsed = parse(b"url,title\nhttps://example.org/a,First\nhttps://example.org/b,Second\n")
    assert [link.title for link in parsed.links] == ["First", "Second"]


def test_a_file_that_is_not_utf8_names_its_line() -> None:
    with pytest.raises(ApiError) as err:
        parse(b"url,title\nhttps://example.org/a,First\n\xff\xfe broken\n")
    assert err.value.status == 400 and err.value.extra.get("line") == 3
