"""ZIPs of folders for the import tests: a vault of Markdown notes with front matter, and the hostile archives of
issue 48 item 6 (links, device files, paths out of the archive, bombs, too many entries, truncated or corrupt)."""

from __future__ import annotations

import functools
import io
import stat
import struct
import zipfile
import zlib
from collections.abc import Mapping

NOTES = {
    "Vault/Welcome.md": "---\ntitle: Welcome to the vault\ntags: [start]\n---\n# Welcome\n\nTides follow the moon "
                        "twice a day in the harbour of Saint-Malo.\n",
    "Vault/Projects/Plan.md": "# Q3 plan\n\nThe Q3 plan ships the glacier survey before the autumn storms.\n",
    "Vault/Projects/Notes/Ideas.md": "# Ideas\n\nPaint the lighthouse blue; count the puffins on the cliffs.\n",
    "Vault/Daily/2026-05-01.txt": "Walked to the old mill and heard the water wheel turning all afternoon.\n",
    "Vault/.obsidian/workspace.json": '{"main": {}}',
    "Vault/.DS_Store": "\x00\x01junk",
    "Vault/Attachments/tool.exe": "MZ\x90\x00 not for Lev",
}


def zip_of(files: Mapping[str, bytes | str], *, method: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A ZIP holding `files` (name -> content), in order."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def zip_with(entries: list[tuple[zipfile.ZipInfo, bytes]]) -> bytes:
    """A ZIP of hand-made entries (their names, modes and flags as given)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for info, data in entries:
            zf.writestr(info, data)
    return buf.getvalue()


def entry(name: str, mode: int | None = None) -> zipfile.ZipInfo:
    """A ZIP entry named `name` (kept as given, `../` included), with a Unix file mode when given."""
    info = zipfile.ZipInfo("placeholder")
    info.filename = name  # ZipInfo's constructor would normalise the name
    info.orig_filename = name
    info.compress_type = zipfile.ZIP_DEFLATED
    if mode is not None:
        info.create_system = 3
        info.external_attr = mode << 16
    return info


def encrypted(data: bytes, name: str) -> bytes:
    """The archive with entry `name` flagged encrypted (bit 0 of its flags; zipfile writes no encrypted entries)."""
    out = bytearray(data)
    needle = name.encode()
    for sig, flags_at, name_at in ((b"PK\x03\x04", 6, 30), (b"PK\x01\x02", 8, 46)):
        at = out.find(sig)
        while at >= 0:
            if out[at + name_at:at + name_at + len(needle)] == needle:
                struct.pack_into("<H", out, at + flags_at, struct.unpack_from("<H", out, at + flags_at)[0] | 0x1)
            at = out.find(sig, at + 4)
    return bytes(out)


def special_entries() -> bytes:
    """A vault with a symbolic link, a character device, a FIFO, a socket and an encrypted entry beside a note."""
    return encrypted(zip_with([
        (entry("Vault/note.md", stat.S_IFREG | 0o644), b"# A real note\n\nThe heron waits by the reeds.\n"),
        (entry("Vault/passwd.md", stat.S_IFLNK | 0o777), b"/etc/passwd"),
        (entry("Vault/tty.md", stat.S_IFCHR | 0o600), b""),
        (entry("Vault/pipe.md", stat.S_IFIFO | 0o600), b""),
        (entry("Vault/sock.md", stat.S_IFSOCK | 0o600), b""),
        (entry("Vault/secret.md", stat.S_IFREG | 0o600), b"not really encrypted"),
    ]), "Vault/secret.md")


def declared_sizes(data: bytes, size: int) -> bytes:
    """The archive with every central directory entry declaring `size` unpacked bytes (its data unchanged): a
    bomb by declaration, never unpacked."""
    out = bytearray(data)
    at = out.find(b"PK\x01\x02")
    while at >= 0:
        struct.pack_into("<I", out, at + 24, size)
        at = out.find(b"PK\x01\x02", at + 4)
    return bytes(out)


def _hand_zip(members: list[tuple[str, bytes, int, int, int]]) -> bytes:
    """A ZIP of (name, data as stored, CRC-32, unpacked size, method) written by hand: zipfile takes seconds for
    100,000 entries or to deflate 60 MB of zeros (here deflated once and repeated)."""
    local, central = [], []
    offset = 0
    for name_str, data, crc, size, method in members:
        name = name_str.encode()
        head = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0, crc, len(data), size, len(name), 0)
        central.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0, crc, len(data), size,
                                   len(name), 0, 0, 0, 0, 0, offset) + name)
        local.append(head + name + data)
        offset += len(local[-1])
    directory = b"".join(central)
    count = len(members)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, min(count, 0xFFFF), min(count, 0xFFFF), len(directory), offset,
                      0)
    if count >= 0xFFFF:  # zip64: the end record's counts say "see the zip64 record"
        z64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, len(directory), offset)
        locator = struct.pack("<IIQI", 0x07064B50, 0, offset + len(directory), 1)
        end = z64 + locator + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, len(directory), offset, 0)
    return b"".join(local) + directory + end


@functools.cache
def zeros_bomb(files: int = 3, each: int = 24 * 1024 * 1024) -> bytes:
    """Real files of zeros: a hundred KB that unpack to `files` x `each` bytes (72 MiB: past the 64 MiB below
    which no ratio is refused)."""
    raw = b"0" * each
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    data = packer.compress(raw) + packer.flush()
    crc = zlib.crc32(raw)
    return _hand_zip([(f"Bomb/zeros-{n}.txt", data, crc, each, zipfile.ZIP_DEFLATED) for n in range(files)])


@functools.cache
def tiny_files(count: int) -> bytes:
    """An archive of `count` one-byte files, stored."""
    crc = zlib.crc32(b"x")
    return _hand_zip([(f"Many/n{n}.txt", b"x", crc, 1, zipfile.ZIP_STORED) for n in range(count)])


def corrupt_member(data: bytes, name: str) -> bytes:
    """The archive with the compressed data of member `name` scrambled (its CRC no longer matches)."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        info = zf.getinfo(name)
    out = bytearray(data)
    header = info.header_offset
    name_len, extra_len = struct.unpack_from("<HH", out, header + 26)
    start = header + 30 + name_len + extra_len
    for i in range(start, start + min(info.compress_size, 64)):
        out[i] ^= 0x5A
    return bytes(out)
