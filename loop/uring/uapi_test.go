package uring

import (
	"testing"
	"unsafe"
)

// The mirrored structs are kernel ABI: a wrong size corrupts the ring.
func TestABISizes(t *testing.T) {
	for _, size := range []struct {
		name      string
		got, want uintptr
	}{
		{"io_uring_sqe", unsafe.Sizeof(SQE{}), 64},
		{"io_uring_cqe", unsafe.Sizeof(CQE{}), 16},
		{"io_uring_params", unsafe.Sizeof(Params{}), 120},
		{"io_sqring_offsets", unsafe.Sizeof(SQRingOffsets{}), 40},
		{"io_cqring_offsets", unsafe.Sizeof(CQRingOffsets{}), 40},
		{"__kernel_timespec", unsafe.Sizeof(Timespec{}), 16},
		{"io_uring_getevents_arg", unsafe.Sizeof(getEventsArgument{}), 24},
		{"io_uring_buf", unsafe.Sizeof(bufferRingEntry{}), bufferRingEntrySize},
		{"io_uring_buf_reg", unsafe.Sizeof(bufferRegistration{}), 40},
		{"io_uring_probe", unsafe.Sizeof(probeResult{}), 16 + 256*8},
	} {
		if size.got != size.want {
			t.Errorf("%s: %d bytes, want %d", size.name, size.got, size.want)
		}
	}
	var sqe SQE
	for _, field := range []struct {
		name      string
		got, want uintptr
	}{
		{"fd", unsafe.Offsetof(sqe.Fd), 4},
		{"off", unsafe.Offsetof(sqe.Offset), 8},
		{"addr", unsafe.Offsetof(sqe.Address), 16},
		{"len", unsafe.Offsetof(sqe.Length), 24},
		{"rw_flags", unsafe.Offsetof(sqe.OpFlags), 28},
		{"user_data", unsafe.Offsetof(sqe.UserData), 32},
		{"buf_index", unsafe.Offsetof(sqe.BufferIndex), 40},
		{"file_index", unsafe.Offsetof(sqe.FileIndex), 44},
		{"addr3", unsafe.Offsetof(sqe.Address3), 48},
	} {
		if field.got != field.want {
			t.Errorf("sqe.%s at %d, want %d", field.name, field.got, field.want)
		}
	}
}

func TestUserDataRoundTrip(t *testing.T) {
	for _, token := range []struct {
		kind       uint8
		slot       uint32
		generation uint32
	}{
		{0, 0, 0}, {1, 2, 3}, {255, MaxSlot, ^uint32(0)}, {7, 1 << 23, 1 << 31}, {128, 12345, 99},
	} {
		encoded := EncodeUserData(token.kind, token.slot, token.generation)
		kind, slot, generation := DecodeUserData(encoded)
		if kind != token.kind || slot != token.slot || generation != token.generation {
			t.Errorf("%+v encoded %#x decoded (%d, %d, %d)", token, encoded, kind, slot, generation)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("EncodeUserData accepted a slot above MaxSlot")
		}
	}()
	EncodeUserData(1, MaxSlot+1, 0)
}

func TestPrepSetsEveryField(t *testing.T) {
	var sqe SQE
	sqe.PrepMultishotRecv(5, 9, 0x40)
	sqe.SetUserData(77)
	want := SQE{Opcode: OpRecv, Flags: SQEBufferSelect, IOPriority: RecvMultishot, Fd: 5,
		OpFlags: 0x40, UserData: 77, BufferIndex: 9}
	if sqe != want {
		t.Errorf("multishot recv SQE = %+v, want %+v", sqe, want)
	}
	sqe = SQE{}
	sqe.PrepMsgRing(3, 42, 1234, MsgRingCQESkip)
	want = SQE{Opcode: OpMsgRing, Fd: 3, Length: 42, Offset: 1234, OpFlags: MsgRingCQESkip}
	if sqe != want {
		t.Errorf("msg ring SQE = %+v, want %+v", sqe, want)
	}
}

func TestCQEHelpers(t *testing.T) {
	cqe := CQE{Result: 10, Flags: 5<<cqeBufferShift | CQEFlagBuffer | CQEFlagMore}
	if id, ok := cqe.BufferID(); !ok || id != 5 || !cqe.More() || cqe.Err() != nil {
		t.Errorf("BufferID = %d, %v; More = %v; Err = %v", id, ok, cqe.More(), cqe.Err())
	}
	if err := (CQE{Result: -11}).Err(); err == nil || err.Error() == "" {
		t.Errorf("negative result gave %v", err)
	}
	var ops OpSet
	ops.add(OpRecv)
	ops.add(Opcode(200))
	if !ops.Has(OpRecv) || ops.Has(OpSend) || ops.String() != "RECV (+1 more)" {
		t.Errorf("OpSet %v", ops)
	}
}
