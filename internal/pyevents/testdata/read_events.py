"""Reads TensorBoard event files without towerflow's Go code.

Usage: read_events.py FILE...

Each FILE is read as TFRecord records (uint64 length, uint32 masked CRC32C
of the length, the data, uint32 masked CRC32C of the data); both checksums
are checked, and each record's data is parsed as a tensorflow.Event with
Python's protobuf runtime (Debian: python3-protobuf), from message
descriptors built here from the field numbers of TensorFlow's event.proto
and summary.proto. Prints, as JSON, a list with one object per file:
{"file": FILE, "events": [{"wall_time", "step", "what", "file_version",
"summary": [{"tag", "kind", "simple_value"}]}]}. A non-finite
simple_value is printed as the string "nan", "inf" or "-inf" (JSON has no
such numbers). Exits with status 1 and a message on standard error on the
first problem.
"""

import json
import math
import struct
import sys

from google.protobuf import descriptor_pb2

# FD, records, message_class and unknown_fields come from
# internal/testpython/tfrecord.py, which the test prepends.


def _field(msg, name, number, type_, type_name=None, oneof=None):
    f = msg.field.add(name=name, number=number, type=type_, label=FD.LABEL_OPTIONAL)
    if type_name:
        f.type_name = type_name
    if oneof is not None:
        f.oneof_index = oneof


def _classes():
    """Event and Summary classes from event.proto / summary.proto's field
    numbers (only the fields a scalar summary uses, and a few neighbours
    so that a field written under the wrong number is noticed)."""
    fdp = descriptor_pb2.FileDescriptorProto(name="towerflow_check/event.proto", package="tbcheck", syntax="proto3")
    summary = fdp.message_type.add(name="Summary")
    value = summary.nested_type.add(name="Value")
    value.oneof_decl.add(name="value")
    _field(value, "node_name", 7, FD.TYPE_STRING)
    _field(value, "tag", 1, FD.TYPE_STRING)
    _field(value, "simple_value", 2, FD.TYPE_FLOAT, oneof=0)
    _field(value, "obsolete_old_style_histogram", 3, FD.TYPE_BYTES, oneof=0)
    _field(value, "image", 4, FD.TYPE_BYTES, oneof=0)  # a message; bytes will do to notice it
    _field(value, "histo", 5, FD.TYPE_BYTES, oneof=0)
    _field(value, "audio", 6, FD.TYPE_BYTES, oneof=0)
    _field(value, "tensor", 8, FD.TYPE_BYTES, oneof=0)
    summary.field.add(name="value", number=1, type=FD.TYPE_MESSAGE, label=FD.LABEL_REPEATED,
                      type_name=".tbcheck.Summary.Value")
    session_log = fdp.message_type.add(name="SessionLog")
    _field(session_log, "status", 1, FD.TYPE_INT32)  # enum SessionStatus: START = 1
    _field(session_log, "checkpoint_path", 2, FD.TYPE_STRING)
    _field(session_log, "msg", 3, FD.TYPE_STRING)
    event = fdp.message_type.add(name="Event")
    event.oneof_decl.add(name="what")
    _field(event, "wall_time", 1, FD.TYPE_DOUBLE)
    _field(event, "step", 2, FD.TYPE_INT64)
    _field(event, "file_version", 3, FD.TYPE_STRING, oneof=0)
    _field(event, "graph_def", 4, FD.TYPE_BYTES, oneof=0)
    _field(event, "summary", 5, FD.TYPE_MESSAGE, ".tbcheck.Summary", oneof=0)
    _field(event, "log_message", 6, FD.TYPE_BYTES, oneof=0)
    _field(event, "session_log", 7, FD.TYPE_MESSAGE, ".tbcheck.SessionLog", oneof=0)
    _field(event, "tagged_run_metadata", 8, FD.TYPE_BYTES, oneof=0)
    _field(event, "meta_graph_def", 9, FD.TYPE_BYTES, oneof=0)
    return message_class(fdp, "tbcheck.Event")


def _number(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _check_known(where, ev):
    """A field under a number (or wire type) the protos do not give it is
    an error, not something to skip."""
    msgs = [("Event", ev)]
    if ev.WhichOneof("what") == "summary":
        msgs.append(("Summary", ev.summary))
        msgs += [("Summary.Value", v) for v in ev.summary.value]
    if ev.WhichOneof("what") == "session_log":
        msgs.append(("SessionLog", ev.session_log))
    for name, m in msgs:
        if unknown_fields(m):
            raise ValueError(where + ": %s has fields event.proto/summary.proto do not define" % name)


def read(path, Event):
    events = []
    with open(path, "rb") as f:
        data = f.read()
    for where, body in records(data, path):
        ev = Event.FromString(body)
        _check_known(where, ev)
        out = {"wall_time": ev.wall_time, "step": ev.step, "what": ev.WhichOneof("what")}
        if ev.WhichOneof("what") == "file_version":
            out["file_version"] = ev.file_version
        if ev.WhichOneof("what") == "summary":
            out["summary"] = [
                {"tag": v.tag, "kind": v.WhichOneof("value"), "simple_value": _number(v.simple_value)}
                for v in ev.summary.value
            ]
        if ev.WhichOneof("what") == "session_log":
            out["session_status"] = ev.session_log.status
        events.append(out)
    return events


def main(paths):
    Event = _classes()
    result = []
    for p in paths:
        result.append({"file": p, "events": read(p, Event)})
    json.dump(result, sys.stdout, allow_nan=False)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except Exception as e:  # a message, not a traceback, for the Go test
        print("read_events: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        sys.exit(1)
