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

from google.protobuf import descriptor_pb2

# FD, frame, records, message_class and unknown_fields come from
# internal/testpython/tfrecord.py, which the test prepends.


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
    return message_class(fdp, "excheck.Example")


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
        if unknown_fields(m):
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
            f.write(frame(ex.SerializeToString()))


def read(path, compression, Example):
    with _open(path, compression, "rb") as f:
        data = f.read()
    out = []
    for where, body in records(data, path):
        ex = Example.FromString(body)
        if unknown_fields(ex) or unknown_fields(ex.features):
            raise ValueError(where + ": fields example.proto does not define")
        feats = {name: _from_feature("%s: feature %r" % (where, name), ex.features.feature[name])
                 for name in ex.features.feature}
        out.append({"features": feats, "bytes": ex.SerializeToString(deterministic=True).hex()})
    json.dump(out, sys.stdout)


def main(args):
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
