"""Hostile documents for the readers' tests: bombs, lies in zip directories, huge page trees."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib


def pdf_from_objects(objs: list[bytes]) -> bytes:
    """A PDF file of these objects (numbered from 1, the first the catalog), with a correct xref table."""
    out = b"%PDF-1.7\n"
    offs = []
    for i, o in enumerate(objs, 1):
        offs.append(len(out))
        out += b"%d 0 obj\n" % i + o + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1) + b"".join(b"%010d 00000 n \n" % o for o in offs)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return out


def _inflating(head: bytes, total: int) -> bytes:
    """A zlib stream that inflates to ``head`` and ``total`` bytes of spaces, made without holding them:
    after a full flush every 1 MiB block of spaces compresses to the same bytes."""
    block = b" " * (1 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)
    blk = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    end = c.flush(zlib.Z_FINISH)
    adler = zlib.adler32(head)
    for _ in range(total >> 20):
        adler = zlib.adler32(block, adler)
    return b"\x78\xda" + first + blk * (total >> 20) + end + adler.to_bytes(4, "big")


def pdf_inflation_bomb(total: int = 1 << 30) -> bytes:
    """A PDF of a few KiB whose one content stream, deflated twice, inflates to ``total`` bytes."""
    inner = _inflating(b"BT /F1 12 Tf 72 712 Td (boom) Tj ET\n", total)
    stream = zlib.compress(inner, 9)
    return pdf_from_objects([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter [/FlateDecode /FlateDecode] >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ])


def pdf_pages(n: int) -> bytes:
    """A PDF of ``n`` pages that all show one shared content stream."""
    content = b"BT /F1 12 Tf 72 712 Td (a page) Tj ET"
    kids = b" ".join(b"%d 0 R" % (5 + i) for i in range(n))
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % n,
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R /Resources << /Font << /F1 4 0 R >> >> >>"
    objs += [page] * n
    return pdf_from_objects(objs)


def replace_member(data: bytes, name: str, content: bytes) -> bytes:
    """The zip ``data`` with member ``name``'s content replaced (deflated), other members as they were."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            body = content if info.filename == name else src.read(info)
            ctype = zipfile.ZIP_STORED if info.filename == "mimetype" else zipfile.ZIP_DEFLATED
            dst.writestr(info.filename, body, compress_type=ctype)
    return out.getvalue()


def lie_about_size(data: bytes, name: str, size: int) -> bytes:
    """The zip ``data`` with member ``name``'s uncompressed size given as ``size`` in both its local header
    and the central directory (a directory that lies, as a crafted bomb's does)."""
    buf = bytearray(data)
    raw = name.encode()
    at = 0
    while True:
        at = buf.find(b"PK\x01\x02", at)
        if at < 0:
            break
        n = struct.unpack_from("<H", buf, at + 28)[0]
        if bytes(buf[at + 46 : at + 46 + n]) == raw:
            struct.pack_into("<I", buf, at + 24, size)
            local = struct.unpack_from("<I", buf, at + 42)[0]
            struct.pack_into("<I", buf, local + 22, size)
        at += 4
    return bytes(buf)


def set_encrypted_flag(data: bytes) -> bytes:
    """The zip ``data`` with every member's "encrypted" flag set, in both headers."""
    buf = bytearray(data)
    for sig, off in ((b"PK\x01\x02", 8), (b"PK\x03\x04", 6)):
        at = 0
        while (at := buf.find(sig, at)) >= 0:
            struct.pack_into("<H", buf, at + off, struct.unpack_from("<H", buf, at + off)[0] | 1)
            at += 4
    return bytes(buf)
