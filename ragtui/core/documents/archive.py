"""Reading members of a zip archive (.docx, .epub, .odt) within bounds, and their XML without entities.

The archive's directory is checked before anything is inflated (total size, ratio per member,
encryption), and every member is inflated a block at a time counting its bytes, so an archive whose
directory lies about sizes is stopped at the bound too.
"""

from __future__ import annotations

import io
import zipfile
from xml.etree import ElementTree as ET

from ragtui.core.documents.base import Limits, Unreadable

__all__ = ["Archive", "parse_xml", "zip_magic"]

_BLOCK = 1 << 16
_SMALL = 1 << 20  # a member this small is not judged by its compression ratio


def zip_magic(head: bytes, mimetype: bytes | None = None, first_member: bytes | None = None) -> bool:
    """Whether ``head`` opens a zip whose first member is ``mimetype`` holding this media type (EPUB, ODF),
    or is named ``first_member`` (OOXML)."""
    if not head.startswith(b"PK\x03\x04") or len(head) < 30:
        return False
    name_len = int.from_bytes(head[26:28], "little")
    extra_len = int.from_bytes(head[28:30], "little")
    name = head[30 : 30 + name_len]
    if first_member is not None and name == first_member:
        return True
    if mimetype is not None and name == b"mimetype":
        start = 30 + name_len + extra_len
        return head[start : start + len(mimetype)] == mimetype
    return False


class Archive:
    """A zip archive read within ``Limits`` (``Unreadable`` for one that is broken, encrypted or a bomb)."""

    def __init__(self, data: bytes, limits: Limits, what: str) -> None:
        self.what = what
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
            infos = self.zip.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, OSError) as e:
            raise Unreadable(f"broken {what}: not a readable zip archive ({e})") from None
        total = 0
        for info in infos:
            if info.flag_bits & 0x1:
                raise Unreadable(f"encrypted {what}: it needs a password")
            total += info.file_size
            if info.file_size > _SMALL and info.file_size > limits.max_ratio * max(info.compress_size, 1):
                raise Unreadable(
                    f"{what} member {info.filename[:80]!r} would inflate {info.file_size:,} bytes from "
                    f"{info.compress_size:,} (a decompression bomb)"
                )
        if total > limits.max_inflated:
            raise Unreadable(f"{what} would inflate to {total:,} bytes, over the {limits.max_inflated:,}-byte limit")
        self.names = {info.filename: info for info in infos}
        self.budget = limits.max_inflated

    def has(self, name: str) -> bool:
        return name in self.names

    def read(self, name: str) -> bytes:
        """The member ``name``, inflated; counts against the archive's budget."""
        info = self.names.get(name)
        if info is None:
            raise Unreadable(f"broken {self.what}: no {name[:80]!r} in the archive")
        parts = []
        got = 0
        try:
            with self.zip.open(info) as f:
                while True:
                    block = f.read(_BLOCK)
                    if not block:
                        break
                    got += len(block)
                    if got > info.file_size or got > self.budget:
                        raise Unreadable(
                            f"{self.what} member {name[:80]!r} inflates past its declared size or the "
                            f"{self.budget:,}-byte limit (a decompression bomb)"
                        )
                    parts.append(block)
        except (zipfile.BadZipFile, EOFError, OSError, ValueError, NotImplementedError) as e:
            raise Unreadable(f"broken {self.what}: member {name[:80]!r} cannot be inflated ({e})") from None
        except RuntimeError as e:  # zipfile's "encrypted, password required"
            raise Unreadable(f"encrypted {self.what}: {e}") from None
        self.budget -= got
        return b"".join(parts)

    def xml(self, name: str) -> ET.Element:
        return parse_xml(self.read(name), f"{self.what} member {name[:80]!r}")


def parse_xml(data: bytes, what: str) -> ET.Element:
    """``data`` parsed as XML; one that declares a document type (entities, the "billion laughs") is refused."""
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        raise Unreadable(f"{what} declares a document type or entities, which ragtui never expands")
    try:
        return ET.fromstring(data)
    except ET.ParseError as e:
        raise Unreadable(f"broken {what}: not well-formed XML ({e})") from None
