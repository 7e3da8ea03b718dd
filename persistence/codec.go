package persistence

import (
	"encoding/binary"
	"fmt"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
)

const sep = 0x00

// encodeAny wraps msg with its type so it can be decoded without knowing it
// in advance. Every persisted type is generated code registered in the
// global protobuf registry.
func encodeAny(msg proto.Message) ([]byte, error) {
	a, err := anypb.New(msg)
	if err != nil {
		return nil, fmt.Errorf("persistence: wrap %T: %w", msg, err)
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(a)
}

// decoder decodes what encodeAny wrote. It remembers the message type of
// each type URL it has seen, so a journal of known event types decodes
// without a registry lookup or a string allocation per record. The zero
// value is ready to use; it is safe for concurrent use.
type decoder struct {
	mu    sync.RWMutex
	types map[string]protoreflect.MessageType
}

// decode reads the Any envelope by hand and unmarshals its value straight
// into the named type: one message and no copy of the value, where
// anypb.UnmarshalNew builds an Any, copies the value and then decodes it.
// The caller may reuse b afterwards (protobuf copies strings and bytes
// out of it).
func (d *decoder) decode(b []byte) (proto.Message, error) {
	url, value, err := splitAny(b)
	if err != nil {
		return nil, err
	}
	mt, err := d.messageType(url)
	if err != nil {
		return nil, err
	}
	m := mt.New().Interface()
	if err := proto.Unmarshal(value, m); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, url, err)
	}
	return m, nil
}

// messageType returns the registered type of a type URL.
func (d *decoder) messageType(url []byte) (protoreflect.MessageType, error) {
	d.mu.RLock()
	mt, ok := d.types[string(url)] // no allocation: a map index by converted bytes
	d.mu.RUnlock()
	if ok {
		return mt, nil
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(string(url))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, url, err)
	}
	d.mu.Lock()
	if d.types == nil {
		d.types = map[string]protoreflect.MessageType{}
	}
	d.types[string(url)] = mt
	d.mu.Unlock()
	return mt, nil
}

// splitAny returns the type URL and the value of an encoded
// google.protobuf.Any (fields 1 and 2; anything else is skipped). Both
// alias b.
func splitAny(b []byte) (url, value []byte, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, nil, fmt.Errorf("%w: %v", ErrCorrupt, protowire.ParseError(n))
		}
		b = b[n:]
		if (num == 1 || num == 2) && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return nil, nil, fmt.Errorf("%w: %v", ErrCorrupt, protowire.ParseError(m))
			}
			if num == 1 {
				url = v
			} else {
				value = v
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return nil, nil, fmt.Errorf("%w: %v", ErrCorrupt, protowire.ParseError(m))
		}
		b = b[m:]
	}
	if len(url) == 0 {
		return nil, nil, fmt.Errorf("%w: no type URL", ErrCorrupt)
	}
	return url, value, nil
}

func key(kind byte, parts ...string) []byte {
	n := 1
	for _, p := range parts {
		n += 1 + len(p)
	}
	k := make([]byte, 0, n+8)
	k = append(k, kind)
	for _, p := range parts {
		k = append(k, sep)
		k = append(k, p...)
	}
	return k
}

func indexedKey(kind byte, name string, index uint64) []byte {
	k := key(kind, name)
	k = append(k, sep)
	return binary.BigEndian.AppendUint64(k, index)
}

func prefixOf(kind byte, name string) []byte {
	return append(key(kind, name), sep)
}

func indexOf(k []byte) uint64 {
	return binary.BigEndian.Uint64(k[len(k)-8:])
}
