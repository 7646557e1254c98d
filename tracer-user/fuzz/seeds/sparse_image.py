#!/usr/bin/env python3
"""Turn an F2FS image into the f2fs_image fuzz target's input: a little-endian u32 size in
4 KiB blocks, then runs of the image's non-zero bytes, each a u32 byte offset, a u16 length
and the bytes (zero gaps shorter than 16 bytes stay inside a run).

    sparse_image.py IMAGE OUTPUT
"""
import struct
import sys

GAP = 16
MAX_RUN = 0xFFFF


def runs(data):
    i, n = 0, len(data)
    while i < n:
        while i < n and data[i] == 0:
            i += 1
        if i == n:
            return
        start, end, zeros = i, i, 0
        while end < n and end - start < MAX_RUN and zeros < GAP:
            zeros = zeros + 1 if data[end] == 0 else 0
            end += 1
        stop = end - zeros if zeros else end
        yield start, data[start:stop]
        i = end


def main(image, output):
    data = open(image, "rb").read()
    out = bytearray(struct.pack("<I", len(data) // 4096))
    for offset, chunk in runs(data):
        out += struct.pack("<IH", offset, len(chunk)) + chunk
    open(output, "wb").write(out)
    print(f"{image}: {len(data)} bytes -> {output}: {len(out)} bytes")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
