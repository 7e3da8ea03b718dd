package persistence

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/proto"
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

func decodeAny(b []byte) (proto.Message, error) {
	var a anypb.Any
	if err := proto.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	m, err := a.UnmarshalNew()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, a.GetTypeUrl(), err)
	}
	return m, nil
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
