"""What a document's container must be before any reader opens it: a ZIP (OOXML, ODF, EPUB) within caps on its
members, their unpacked size and their compression ratio (a ZIP bomb is refused from its central directory, before
anything is unpacked), without encrypted members, whose XML parts declare no entities; the XML parser every reader
here uses (no entities resolved, no DTD loaded, no network); and the compound file (OLE2) that is either a
password-protected Office file or an old binary one, told apart and refused in words.

Python's zipfile never unpacks more than a member declares (it stops there and the CRC fails), so the caps on the
declared sizes bound what unpacking costs.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable
from typing import IO, Any
from xml.parsers import expat

import olefile
from lxml import etree

from lev.core.errors import ApiError, extraction_failed, unsupported_media_type

MAX_MEMBERS = 10_000
MAX_UNPACKED_BYTES = 1 << 30  # all members together, as declared
MAX_RATIO = 200  # unpacked : packed, for a member of more than RATIO_FLOOR bytes
RATIO_FLOOR = 1 << 20
PROLOG_BYTES = 1 << 20  # an XML part whose root element has not begun by then is refused
OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_XML_SUFFIXES = (".xml", ".rels", ".opf", ".ncx", ".xhtml", ".htm", ".html", ".svg")

# No entity is ever substituted, no DTD loaded, nothing fetched; libxml2's own bounds on depth and size stay on.
PARSER_OPTIONS: dict[str, Any] = {"resolve_entities": False, "load_dtd": False, "no_network": True,
                                  "huge_tree": False}


def xml_parser(**extra: Any) -> etree.XMLParser:
    return etree.XMLParser(**PARSER_OPTIONS, **extra)


def parse_xml(stream: IO[bytes] | bytes, what: str) -> Any:
    """The root element of an XML part (hardened parser); 422 extraction_failed when it is not well-formed."""
    data = stream if isinstance(stream, bytes) else stream.read()
    try:
        return etree.fromstring(data, xml_parser(recover=False))
    except etree.XMLSyntaxError as exc:
        raise extraction_failed(f"The {what} is not well-formed XML: {str(exc)[:200]}") from None


class _Rooted(Exception):
    pass


def declares_entities(stream: IO[bytes]) -> bool:
    """Whether the XML part declares an entity before its root element (the only place a DTD may: its prolog is
    read, in any encoding, and nothing after the root element starts). Malformed XML is left to the reader."""
    parser = expat.ParserCreate()
    found = False

    def entity(*_args: Any) -> None:
        nonlocal found
        found = True
        raise _Rooted()

    def root(*_args: Any) -> None:
        raise _Rooted()

    parser.EntityDeclHandler = entity
    parser.UnparsedEntityDeclHandler = entity
    parser.StartElementHandler = root
    read = 0
    try:
        while read < PROLOG_BYTES:
            block = stream.read(16384)
            read += len(block)
            parser.Parse(block, not block)
            if not block:
                return False
    except _Rooted:
        return found
    except expat.ExpatError:
        return False
    raise extraction_failed("An XML part of the file has no root element in its first MiB; refused.")


def open_zip(data: bytes, what: str, required: Iterable[str] = ()) -> zipfile.ZipFile:
    """The ZIP container of a `what` (".docx file") once it passed every check: 422 extraction_failed for a corrupt
    or truncated file, a ZIP bomb, encrypted members or XML entity declarations; 415 unsupported_media_type for a
    ZIP of something else (a `required` member missing)."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as exc:
        raise extraction_failed(f"The {what} is corrupt or truncated (not a readable ZIP container: {exc}).") from None
    check_members(infos, what)
    names = {i.filename for i in infos}
    missing = [name for name in required if name not in names]
    if missing:
        raise unsupported_media_type(f"The {what} is a ZIP archive but not what its type says: it has no "
                                     f"{missing[0]}.")
    for info in infos:
        if info.filename.lower().endswith(_XML_SUFFIXES) and info.file_size:
            try:
                with zf.open(info) as member:
                    if declares_entities(member):
                        raise extraction_failed(f"The {what} declares XML entities in {info.filename[:200]} (an "
                                                "entity expansion trick); refused, nothing was expanded.")
            except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError) as exc:
                raise extraction_failed(f"The {what} is corrupt or truncated ({info.filename[:200]}: {exc}).") \
                    from None
    return zf


def check_members(infos: list[zipfile.ZipInfo], what: str) -> None:
    """Refuse, from the central directory alone, what unpacking would make dangerous."""
    if len(infos) > MAX_MEMBERS:
        raise extraction_failed(f"The {what} holds {len(infos)} files; at most {MAX_MEMBERS} are read.")
    total = 0
    for info in infos:
        if info.flag_bits & 0x1:
            raise extraction_failed(f"The {what} is password-protected (its parts are encrypted); remove the "
                                    "password and upload it again.")
        total += info.file_size
        ratio = info.file_size // max(info.compress_size, 1)
        if info.file_size > RATIO_FLOOR and ratio > MAX_RATIO:
            raise extraction_failed(f"The {what} looks like a ZIP bomb: {info.filename[:200]} unpacks {ratio} times "
                                    f"larger than it is packed (at most {MAX_RATIO} times is read).")
    if total > MAX_UNPACKED_BYTES:
        raise extraction_failed(f"The {what} unpacks to {total} bytes; at most {MAX_UNPACKED_BYTES} (1 GiB) are "
                                "read (a ZIP bomb?).")


def read_member(zf: zipfile.ZipFile, name: str, what: str) -> bytes:
    """One member's bytes; 422 extraction_failed when it is corrupt."""
    try:
        return zf.read(name)
    except KeyError:
        raise extraction_failed(f"The {what} has no {name}.") from None
    except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError) as exc:
        raise extraction_failed(f"The {what} is corrupt or truncated ({name}: {exc}).") from None


def refuse_compound(data: bytes, what: str) -> ApiError:
    """The refusal of a compound file (OLE2) sent as a new Office format: a password-protected file (its
    EncryptedPackage) or an old binary .doc, .xls or .ppt."""
    try:
        with olefile.OleFileIO(data) as ole:
            encrypted = ole.exists("EncryptedPackage") or ole.exists("EncryptionInfo")
    except (OSError, ValueError, IndexError, TypeError):
        return extraction_failed(f"The {what} is corrupt: an Office compound file that cannot be read.")
    if encrypted:
        return extraction_failed(f"The {what} is password-protected (encrypted); Lev cannot read it. Remove the "
                                 "password (save it again without one) and upload it again.")
    return unsupported_media_type(f"The {what} is an older binary Office file (.doc, .xls or .ppt), which Lev does "
                                  "not read: save it as .docx, .xlsx or .pptx and upload that.")


def is_compound(data: bytes) -> bool:
    return data.startswith(OLE2_MAGIC)
