package replay

import (
	"bufio"
	"errors"
	"io"
)

// Reading the input: lines up to MaxLineBytes, spooling standard input.

// MaxSpoolBytes bounds the standard input `windowd replay` spools to a
// temporary file to count partitions when --partitions is not given
// (docs/OPERATIONS.md, Limits); with --partitions it streams.
const MaxSpoolBytes = 256 << 20

// MaxSkipBytes bounds how much of a line past MaxLineBytes replay skips
// looking for its end: an input with no newline in that much more (a
// binary file, /dev/zero) stops the replay (docs/OPERATIONS.md, Limits).
const MaxSkipBytes = 4 * MaxLineBytes

// MaxEchoBytes bounds the input a dead letter echoes; a longer line is
// echoed up to it, with its length (docs/OPERATIONS.md, Limits).
const MaxEchoBytes = 1 << 10

// errLineTooLong is a line whose text (without its "\n" or "\r\n")
// passes MaxLineBytes; lineReader.long holds its start.
var errLineTooLong = errors.New("line longer than 16 MiB")

// errNoLineEnd is a line with no end within MaxSkipBytes past MaxLineBytes.
var errNoLineEnd = errors.New("no line end")

// lineReader reads the input's lines; a UTF-8 byte order mark at its start
// (some editors write one) is skipped, not read as part of the first line.
type lineReader struct {
	br   *bufio.Reader
	pos  int64  // input bytes read up to the end of the last line
	at   int64  // where the last line starts
	size int64  // the last line's length without its line end
	head []byte // the start of the last line when it was too long (at most MaxEchoBytes)
	long []byte // a line longer than the buffer, assembled
}

func newLineReader(r io.Reader) *lineReader {
	br := bufio.NewReaderSize(r, 1<<16)
	lr := &lineReader{br: br}
	if b, err := br.Peek(len(utf8BOM)); err == nil && string(b) == utf8BOM {
		_, _ = br.Discard(len(utf8BOM))
		lr.pos = int64(len(utf8BOM))
	}
	return lr
}

const utf8BOM = "\xef\xbb\xbf"

// next returns the next line without its line end ("\n", "\r\n" or any
// run of those bytes at its end). A line whose text passes MaxLineBytes
// is skipped and reported as errLineTooLong (exactly: a line of
// MaxLineBytes is read); one with no end within MaxSkipBytes after that is
// an error that stops the replay.
func (lr *lineReader) next() ([]byte, error) {
	lr.at = lr.pos
	lr.long = lr.long[:0]
	for {
		frag, err := lr.br.ReadSlice('\n')
		lr.pos += int64(len(frag))
		if errors.Is(err, bufio.ErrBufferFull) {
			// +1: a "\r" that may end the line is not part of its text.
			if len(lr.long)+len(frag) > MaxLineBytes+1 {
				return nil, lr.skip(append(lr.long, frag...))
			}
			lr.long = append(lr.long, frag...)
			continue
		}
		if len(lr.long) > 0 {
			frag = append(lr.long, frag...)
			lr.long = frag
		}
		n := len(frag) // bytes.TrimRight(frag, "\r\n"), without its set
		for n > 0 && (frag[n-1] == '\n' || frag[n-1] == '\r') {
			n--
		}
		lr.size = int64(n)
		if n > MaxLineBytes {
			lr.head = append(lr.head[:0], frag[:MaxEchoBytes]...)
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, errLineTooLong
		}
		return frag[:n], err
	}
}

// skip reads the rest of a line too long to keep, whose start is read; it
// returns errLineTooLong, or why the replay must stop.
func (lr *lineReader) skip(start []byte) error {
	lr.head = append(lr.head[:0], start[:MaxEchoBytes]...)
	skipped := int64(0)
	for {
		frag, err := lr.br.ReadSlice('\n')
		lr.pos += int64(len(frag))
		skipped += int64(len(frag))
		switch {
		case err == nil || errors.Is(err, io.EOF):
			n := len(frag)
			for n > 0 && (frag[n-1] == '\n' || frag[n-1] == '\r') {
				n--
			}
			lr.size = lr.pos - lr.at - int64(len(frag)-n)
			return errLineTooLong
		case !errors.Is(err, bufio.ErrBufferFull):
			return err
		case skipped > MaxSkipBytes:
			return errNoLineEnd
		}
	}
}
