// Package tfevents writes and reads TensorBoard event files, the
// events.out.tfevents.* files that TensorFlow's summary writers leave in a
// log directory and TensorBoard reads: the estimator writes its training
// summaries into the model directory and its evaluation summaries into
// model_dir/eval (or eval_<name>) with it, as tf.estimator did.
//
// A file is a sequence of TFRecord records; each record's data is one
// serialized tensorflow.Event protocol buffer. A record is
//
//	uint64 length            little-endian
//	uint32 masked CRC32C     of the 8 length bytes
//	[length]byte data        the serialized Event
//	uint32 masked CRC32C     of the data
//
// where a CRC32C (Castagnoli) is masked as ((crc>>15 | crc<<17) +
// 0xa282ead8). The first Event of a file carries only file_version
// "brain.Event:2"; every later one a wall time, a global step and a
// Summary whose values are scalars (Summary.Value.simple_value, a float32,
// under a tag).
//
// The protocol buffers are encoded by field number with protowire, from
// TensorFlow's event.proto and summary.proto:
//
//	Event:         wall_time = 1 (double), step = 2 (int64),
//	               file_version = 3 (string), summary = 5 (Summary)
//	Summary:       value = 1 (repeated Value)
//	Summary.Value: tag = 1 (string), simple_value = 2 (float)
//
// Only scalars are written; a reader skips the fields it does not know
// (graphs, histograms, images), as protocol buffers allow.
package tfevents

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// FileVersion is the file_version of the first Event of every file this
// package writes, as TensorFlow's writers have written since 2016.
const FileVersion = "brain.Event:2"

// FilePrefix begins the name of every event file:
// events.out.tfevents.<unix seconds, 10 digits>.<hostname>, as TensorFlow
// names them (TensorBoard reads every file whose name contains "tfevents").
const FilePrefix = "events.out.tfevents."

// Field numbers of TensorFlow's event.proto and summary.proto.
const (
	eventWallTime    protowire.Number = 1
	eventStep        protowire.Number = 2
	eventFileVersion protowire.Number = 3
	eventSummary     protowire.Number = 5
	eventSessionLog  protowire.Number = 7

	sessionLogStatus protowire.Number = 1

	summaryValue protowire.Number = 1

	valueTag         protowire.Number = 1
	valueSimpleValue protowire.Number = 2
)

// Scalar is one named value of a summary. Value is stored as a float32,
// as simple_value is.
type Scalar struct {
	Tag   string
	Value float64
}

// SessionStatus is a SessionLog's status: what happened to the training
// session at an Event's step.
type SessionStatus int

// Session statuses, as event.proto numbers them.
const (
	// SessionStart marks where a training session began (a run resumed
	// from a checkpoint at that step): TensorBoard drops what an earlier
	// session wrote for later steps, which a crash left orphaned.
	SessionStart SessionStatus = 1
	SessionStop  SessionStatus = 2
)

// Event is one record of an event file: the file version (the first
// record of a file), scalars at a step, or a SessionLog (tf.Event's
// record of a run starting, stopping or checkpointing).
type Event struct {
	// WallTime is the time of the event in seconds since the Unix epoch.
	WallTime float64
	// Step is the global step.
	Step int64
	// FileVersion is set on a file's first event only.
	FileVersion string
	// Scalars are the event's summary values that are scalars
	// (simple_value), in file order.
	Scalars []Scalar
	// Session, when not 0, makes the event a session_log of this status.
	Session SessionStatus
}

// appendEvent appends e, serialized as a tensorflow.Event, to b. Fields at
// their zero value are left out, as proto3 does; a summary is written
// when e has scalars.
func appendEvent(b []byte, e Event) []byte {
	if e.WallTime != 0 {
		b = protowire.AppendTag(b, eventWallTime, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(e.WallTime))
	}
	if e.Step != 0 {
		b = protowire.AppendTag(b, eventStep, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(e.Step))
	}
	if e.FileVersion != "" {
		b = protowire.AppendTag(b, eventFileVersion, protowire.BytesType)
		b = protowire.AppendString(b, e.FileVersion)
	}
	if e.Session != 0 {
		log := protowire.AppendTag(nil, sessionLogStatus, protowire.VarintType)
		log = protowire.AppendVarint(log, uint64(e.Session))
		b = protowire.AppendTag(b, eventSessionLog, protowire.BytesType)
		b = protowire.AppendBytes(b, log)
	}
	if len(e.Scalars) > 0 {
		var summary []byte
		for _, s := range e.Scalars {
			summary = protowire.AppendTag(summary, summaryValue, protowire.BytesType)
			summary = protowire.AppendBytes(summary, appendValue(nil, s))
		}
		b = protowire.AppendTag(b, eventSummary, protowire.BytesType)
		b = protowire.AppendBytes(b, summary)
	}
	return b
}

// appendValue appends s serialized as a tensorflow.Summary.Value. The
// value is always written: it is a member of a oneof, which proto3 writes
// even at zero.
func appendValue(b []byte, s Scalar) []byte {
	if s.Tag != "" {
		b = protowire.AppendTag(b, valueTag, protowire.BytesType)
		b = protowire.AppendString(b, s.Tag)
	}
	b = protowire.AppendTag(b, valueSimpleValue, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, math.Float32bits(float32(s.Value)))
}

// errMalformed reports an Event that does not parse.
var errMalformed = errors.New("malformed Event")

// parseEvent decodes a serialized tensorflow.Event. Fields it does not know
// are skipped; a known field of the wrong wire type is an error.
func parseEvent(b []byte) (Event, error) {
	var e Event
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == eventWallTime && typ == protowire.Fixed64Type:
			e.WallTime = math.Float64frombits(x)
		case num == eventStep && typ == protowire.VarintType:
			e.Step = int64(x)
		case num == eventFileVersion && typ == protowire.BytesType:
			e.FileVersion = string(v)
		case num == eventSummary && typ == protowire.BytesType:
			return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num != summaryValue {
					return nil
				}
				if typ != protowire.BytesType {
					return wrongType("Summary.value", typ)
				}
				s, ok, err := parseValue(v)
				if ok {
					e.Scalars = append(e.Scalars, s)
				}
				return err
			})
		case num == eventSessionLog && typ == protowire.BytesType:
			return eachField(v, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
				if num == sessionLogStatus && typ == protowire.VarintType {
					e.Session = SessionStatus(x)
				}
				return nil
			})
		case num == eventWallTime || num == eventStep || num == eventFileVersion || num == eventSummary || num == eventSessionLog:
			return wrongType("Event field "+fieldName(num), typ)
		}
		return nil
	})
	return e, err
}

// parseValue decodes a tensorflow.Summary.Value; ok says whether it holds
// a simple_value.
func parseValue(b []byte) (s Scalar, ok bool, err error) {
	err = eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch num {
		case valueTag:
			if typ != protowire.BytesType {
				return wrongType("Summary.Value.tag", typ)
			}
			s.Tag = string(v)
		case valueSimpleValue:
			if typ != protowire.Fixed32Type {
				return wrongType("Summary.Value.simple_value", typ)
			}
			s.Value, ok = float64(math.Float32frombits(uint32(x))), true
		}
		return nil
	})
	return s, ok, err
}

func fieldName(num protowire.Number) string {
	switch num {
	case eventWallTime:
		return "wall_time"
	case eventStep:
		return "step"
	case eventFileVersion:
		return "file_version"
	case eventSessionLog:
		return "session_log"
	default:
		return "summary"
	}
}

func wrongType(field string, typ protowire.Type) error {
	return fmt.Errorf("%w: %s has wire type %d", errMalformed, field, typ)
}

// eachField calls fn for every field of the serialized message b: v holds
// a length-delimited field's bytes, x a varint or fixed-size field's value.
// Groups are skipped.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var x32 uint32
			x32, n = protowire.ConsumeFixed32(b)
			x = uint64(x32)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: field %d: %v", errMalformed, num, protowire.ParseError(n))
		}
		b = b[n:]
		if typ == protowire.StartGroupType {
			continue
		}
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}
