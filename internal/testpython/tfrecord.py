"""TFRecord framing and protobuf helpers for towerflow's test scripts,
written from the format's description, sharing no code with the Go
readers and writers they check. A test prepends this file to its script
(testpython.WithTFRecord), which then uses:

records(data, name): the records of a file's bytes, (where, body) pairs,
    both checksums checked (uint64 length, uint32 masked CRC-32C of the
    length, the data, uint32 masked CRC-32C of the data);
frame(data): one record's bytes;
message_class(fdp, name): the class of message name from a
    FileDescriptorProto built by the script;
unknown_fields(msg): how many fields msg has that its descriptor lacks.
"""

import struct

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

FD = descriptor_pb2.FieldDescriptorProto


def _crc32c_table():
    poly = 0x82F63B78  # Castagnoli, reflected
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


if crc32c(b"123456789") != 0xE3069283:  # the CRC-32C check value
    raise AssertionError("crc32c self-check failed")


def masked_crc(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(data):
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))


def records(data, name):
    pos, n = 0, 0
    while pos < len(data):
        where = "%s: record %d at byte %d" % (name, n, pos)
        if len(data) - pos < 12:
            raise ValueError(where + ": header cut short")
        length_bytes = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        (length_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if length_crc != masked_crc(length_bytes):
            raise ValueError(where + ": length checksum %#010x, want %#010x" % (length_crc, masked_crc(length_bytes)))
        pos += 12
        if len(data) - pos < length + 4:
            raise ValueError(where + ": data cut short")
        body = data[pos:pos + length]
        (body_crc,) = struct.unpack("<I", data[pos + length:pos + length + 4])
        if body_crc != masked_crc(body):
            raise ValueError(where + ": data checksum %#010x, want %#010x" % (body_crc, masked_crc(body)))
        pos += length + 4
        n += 1
        yield where, body


def message_class(fdp, name):
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    get = getattr(message_factory, "GetMessageClass", None)
    if get is None:  # protobuf before 4.22
        get = message_factory.MessageFactory(pool).GetPrototype
    return get(pool.FindMessageTypeByName(name))


def unknown_fields(msg):
    try:
        from google.protobuf import unknown_fields as uf  # protobuf 4.22 on
        return len(uf.UnknownFieldSet(msg))
    except ImportError:
        return len(msg.UnknownFields())
