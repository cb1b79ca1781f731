"""Writes and reads TFRecord files of tf.train.Example without towerflow's
Go code.

Usage: tfexample.py write FILE COMPRESSION < examples.json
       tfexample.py read FILE COMPRESSION > examples.json

COMPRESSION is "" (none), "GZIP" (Python's gzip) or "ZLIB" (Python's
zlib). The framing (uint64 length, uint32 masked CRC-32C of the length,
the data, uint32 masked CRC-32C of the data) and CRC-32C are written and
checked here; each record is a tensorflow.Example built with Python's
protobuf runtime (Debian: python3-protobuf) from message descriptors made
here from the field numbers of TensorFlow's example.proto and
feature.proto (proto3, as TensorFlow declares them).

examples.json is a list with one object per record:
{"features": {NAME: FEATURE}, "bytes": HEX}, where FEATURE is
{"kind": "int64"|"float"|"bytes"|"none", "int64s": [...], "floats": [...],
"bytes": [HEX, ...]} (floats as float32 bit patterns, so that every value,
NaN included, is exact). "bytes" of a record read is protobuf's
deterministic serialization of the message parsed. A record read with
fields the protos do not define is an error. Exits with status 1 and a
message on standard error on the first problem.
"""

import gzip
import json
import struct
import sys
import zlib

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


def masked_crc(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _classes():
    fdp = descriptor_pb2.FileDescriptorProto(name="towerflow_check/example.proto", package="excheck", syntax="proto3")
    rep = FD.LABEL_REPEATED
    opt = FD.LABEL_OPTIONAL
    bl = fdp.message_type.add(name="BytesList")
    bl.field.add(name="value", number=1, type=FD.TYPE_BYTES, label=rep)
    fl = fdp.message_type.add(name="FloatList")
    f = fl.field.add(name="value", number=1, type=FD.TYPE_FLOAT, label=rep)
    f.options.packed = True
    il = fdp.message_type.add(name="Int64List")
    f = il.field.add(name="value", number=1, type=FD.TYPE_INT64, label=rep)
    f.options.packed = True
    feat = fdp.message_type.add(name="Feature")
    feat.oneof_decl.add(name="kind")
    feat.field.add(name="bytes_list", number=1, type=FD.TYPE_MESSAGE, label=opt, type_name=".excheck.BytesList", oneof_index=0)
    feat.field.add(name="float_list", number=2, type=FD.TYPE_MESSAGE, label=opt, type_name=".excheck.FloatList", oneof_index=0)
    feat.field.add(name="int64_list", number=3, type=FD.TYPE_MESSAGE, label=opt, type_name=".excheck.Int64List", oneof_index=0)
    feats = fdp.message_type.add(name="Features")
    entry = feats.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=FD.TYPE_STRING, label=opt)
    entry.field.add(name="value", number=2, type=FD.TYPE_MESSAGE, label=opt, type_name=".excheck.Feature")
    feats.field.add(name="feature", number=1, type=FD.TYPE_MESSAGE, label=rep, type_name=".excheck.Features.FeatureEntry")
    ex = fdp.message_type.add(name="Example")
    ex.field.add(name="features", number=1, type=FD.TYPE_MESSAGE, label=opt, type_name=".excheck.Features")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    get = getattr(message_factory, "GetMessageClass", None)
    if get is None:  # protobuf before 4.22
        get = message_factory.MessageFactory(pool).GetPrototype
    return get(pool.FindMessageTypeByName("excheck.Example"))


def _unknown_fields(msg):
    try:
        from google.protobuf import unknown_fields  # protobuf 4.22 on
        return len(unknown_fields.UnknownFieldSet(msg))
    except ImportError:
        return len(msg.UnknownFields())


def _open(path, compression, mode):
    if compression == "":
        return open(path, mode)
    if compression == "GZIP":
        return gzip.open(path, mode)
    if compression == "ZLIB":
        return _Zlib(path, mode)
    raise ValueError("compression %r" % compression)


class _Zlib:
    def __init__(self, path, mode):
        self.path, self.mode, self.data = path, mode, b""

    def __enter__(self):
        if "r" in self.mode:
            with open(self.path, "rb") as f:
                self.data = zlib.decompress(f.read())
        return self

    def read(self):
        return self.data

    def write(self, b):
        self.data += b

    def __exit__(self, *exc):
        if "w" in self.mode and exc[0] is None:
            with open(self.path, "wb") as f:
                f.write(zlib.compress(self.data))


def _to_feature(msg, obj):
    kind = obj["kind"]
    if kind == "int64":
        msg.int64_list.SetInParent()
        msg.int64_list.value.extend(obj.get("int64s", []))
    elif kind == "float":
        msg.float_list.SetInParent()
        msg.float_list.value.extend(struct.unpack("<f", struct.pack("<I", x))[0] for x in obj.get("floats", []))
    elif kind == "bytes":
        msg.bytes_list.SetInParent()
        msg.bytes_list.value.extend(bytes.fromhex(h) for h in obj.get("bytes", []))
    elif kind != "none":
        raise ValueError("kind %r" % kind)


def _from_feature(where, msg):
    kind = msg.WhichOneof("kind")
    for m in [msg] + ([getattr(msg, kind)] if kind else []):
        if _unknown_fields(m):
            raise ValueError(where + ": fields feature.proto does not define")
    if kind is None:
        return {"kind": "none"}
    if kind == "int64_list":
        return {"kind": "int64", "int64s": list(msg.int64_list.value)}
    if kind == "float_list":
        return {"kind": "float", "floats": [struct.unpack("<I", struct.pack("<f", x))[0] for x in msg.float_list.value]}
    return {"kind": "bytes", "bytes": [v.hex() for v in msg.bytes_list.value]}


def write(path, compression, Example):
    records = json.load(sys.stdin)
    with _open(path, compression, "wb") as f:
        for rec in records:
            ex = Example()
            ex.features.SetInParent()
            for name, obj in rec["features"].items():
                _to_feature(ex.features.feature[name], obj)
            data = ex.SerializeToString()
            length = struct.pack("<Q", len(data))
            f.write(length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data)))


def read(path, compression, Example):
    with _open(path, compression, "rb") as f:
        data = f.read()
    out = []
    pos = 0
    while pos < len(data):
        where = "%s: record %d at byte %d" % (path, len(out), pos)
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
        ex = Example.FromString(body)
        if _unknown_fields(ex) or _unknown_fields(ex.features):
            raise ValueError(where + ": fields example.proto does not define")
        feats = {name: _from_feature("%s: feature %r" % (where, name), ex.features.feature[name])
                 for name in ex.features.feature}
        out.append({"features": feats, "bytes": ex.SerializeToString(deterministic=True).hex()})
    json.dump(out, sys.stdout)


def main(args):
    if crc32c(b"123456789") != 0xE3069283:  # the CRC-32C check value
        raise AssertionError("crc32c self-check failed")
    mode, path, compression = args
    Example = _classes()
    if mode == "write":
        write(path, compression, Example)
    elif mode == "read":
        read(path, compression, Example)
    else:
        raise ValueError("mode %r" % mode)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except Exception as e:  # a message, not a traceback, for the Go test
        print("tfexample: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        sys.exit(1)
