package sink

import "encoding/binary"

// WirePrefix is what precedes a value in the Confluent wire format: the
// magic byte 0 and the schema id (4 bytes, big-endian), and for Protobuf
// the message indexes of the record's message, [0] (the first message of
// the schema) written as the single byte 0.
func WirePrefix(id int, protobuf bool) []byte {
	b := binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
	if protobuf {
		b = append(b, 0)
	}
	return b
}
