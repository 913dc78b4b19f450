"""The tag name rules every surface shares (lev.store.tags, lev.tags.names): one form, case-insensitive keys, the
parents a nested tag gives the filter, what a surface refuses and what an import's tags are cut to; and the web
search box's `tag:` operator."""

from __future__ import annotations

import pytest

from lev.core.errors import ApiError
from lev.library.filters import parse_box, parse_filters, parse_tags
from lev.store.tags import clean_name, key_of, keys_with_parents, normal_form, parents
from lev.tags.names import check_name, check_names, lenient


def test_a_name_has_one_form_and_one_key() -> None:
    assert normal_form("  #Work //  Clients   Big / Acme/ ") == "Work/Clients Big/Acme"
    assert normal_form("#/ /#") == "#"  # only the leading # goes
    # a `.` or `..` part would name another resource in a URL's path (DELETE .../tags/.. deleted the item)
    assert normal_form("work/../acme/./x") == "work/acme/x" and normal_form(" .. / . ") == ""
    assert normal_form("...") == "..." and normal_form("a/.b/..c") == "a/.b/..c"
    assert key_of("Straße/ÆON") == "strasse/æon"  # case-folded, not only lower-cased
    assert parents("a/b/c") == ["a", "a/b", "a/b/c"]
    assert keys_with_parents(["a/b/c", "a/x", "z"]) == ["a", "a/b", "a/b/c", "a/x", "z"]


def test_a_surface_refuses_what_is_no_name() -> None:
    assert check_name(" reading ") == "reading"
    for bad in ("", "  ", "#", "/ /", "..", "./..", "a\x00b", "a\x1fb", "x" * 65, 5, None):
        with pytest.raises(ApiError) as refused:
            check_name(bad)
        assert refused.value.code == "invalid_body" and refused.value.extra["parameter"] == "tags"
    assert check_name("x" * 64) == "x" * 64
    assert check_names(["Work", "work", "WORK/a", "work/A"]) == ["Work", "WORK/a"]  # each key once, first spelling
    with pytest.raises(ApiError):
        check_names([f"t{i}" for i in range(101)])
    with pytest.raises(ApiError):
        check_names("a string is not a list")


def test_an_import_s_tags_are_cut_to_fit() -> None:
    assert clean_name("a\x01b", lenient=True) == "ab" and clean_name("a\x01b") is None
    cut = clean_name("p" * 60 + "/qqqqqqqq", lenient=True)
    assert cut == "p" * 60 + "/qqq" and len(cut) == 64
    assert clean_name("p" * 64 + "/q", lenient=True) == "p" * 64  # cut at 64, the empty end dropped
    assert lenient(["ok", 5, "", "OK", None, "#x", "..", "../../folders/x"]) == ["ok", "x", "folders/x"]
    assert len(lenient([f"t{i}" for i in range(300)])) == 100


def test_filters_and_the_search_box_take_tags() -> None:
    assert parse_tags(["Work", "work/ACME", "urgent"]) == ("urgent", "work", "work/acme")
    assert parse_filters(tag="Reading").tags == ("reading",)
    with pytest.raises(ApiError) as refused:
        parse_filters(tag=["  "], tag_name="tags")
    assert refused.value.extra["parameter"] == "tags"
    with pytest.raises(ApiError):
        parse_tags([f"t{i}" for i in range(21)])
    box = parse_box('harbour tag:work/acme lights TAG:"to read" kind:pdf')
    assert box.words == "harbour lights" and box.tag == ("work/acme", "to read") and box.kind == ("pdf",)
