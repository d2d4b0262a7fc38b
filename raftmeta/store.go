package raftmeta

import (
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// latch stops the member for good at the first failed store write or
// sync. hashicorp/raft itself never latches: a leader whose write fails
// steps down and keeps running, a follower retries on the next append.
// After a failed fsync the file's state is unknown (the kernel may have
// dropped the dirty pages and cleared the error), so nothing that member
// believes may reach a peer again:
//
//   - at the first failure, before the failing call returns, the member
//     is cut off the network (onTrip: its stream layer closes every
//     connection and dials nothing more) and its Raft instance is shut
//     down;
//   - every later write fails with ErrLatched, except the current-term
//     write, which the library cannot take failing (it panics): that one
//     is dropped, harmless with the member already cut off;
//   - reads pass, since the library panics on a failed read of a log it
//     is applying; what it applies can only be an entry the group
//     committed.
//
// The member serves nothing more (Status reports it) until restarted on
// a checked disk.
type latch struct {
	err atomic.Pointer[error]
	// onTrip runs once, at the first failure, before the failing call
	// returns.
	onTrip func()
	// fault, when set (tests), is asked before each write; an error it
	// returns stands for a failed write or sync.
	fault func(op string) error
}

func (l *latch) latched() error {
	if p := l.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (l *latch) trip(op string, err error) error {
	wrapped := fmt.Errorf("%w: %s: %w", ErrLatched, op, err)
	if l.err.CompareAndSwap(nil, &wrapped) && l.onTrip != nil {
		l.onTrip()
	}
	return l.latched()
}

// write runs a store write under the latch.
func (l *latch) write(op string, do func() error) error {
	if err := l.latched(); err != nil {
		return err
	}
	if l.fault != nil {
		if err := l.fault(op); err != nil {
			return l.trip(op, err)
		}
	}
	if err := do(); err != nil {
		return l.trip(op, err)
	}
	return nil
}

// read runs a store read; its errors ("not found") are ordinary answers
// and do not latch.
func (l *latch) read(do func() error) error { return do() }

type latchedLogStore struct {
	inner raft.LogStore
	latch *latch
}

func (s latchedLogStore) FirstIndex() (index uint64, err error) {
	err = s.latch.read(func() (e error) { index, e = s.inner.FirstIndex(); return })
	return
}

func (s latchedLogStore) LastIndex() (index uint64, err error) {
	err = s.latch.read(func() (e error) { index, e = s.inner.LastIndex(); return })
	return
}

func (s latchedLogStore) GetLog(index uint64, entry *raft.Log) error {
	return s.latch.read(func() error { return s.inner.GetLog(index, entry) })
}

func (s latchedLogStore) StoreLog(entry *raft.Log) error {
	return s.latch.write("store log", func() error { return s.inner.StoreLog(entry) })
}

func (s latchedLogStore) StoreLogs(entries []*raft.Log) error {
	return s.latch.write("store logs", func() error { return s.inner.StoreLogs(entries) })
}

func (s latchedLogStore) DeleteRange(low, high uint64) error {
	return s.latch.write("delete range", func() error { return s.inner.DeleteRange(low, high) })
}

type latchedStableStore struct {
	inner raft.StableStore
	latch *latch
}

func (s latchedStableStore) Set(key, value []byte) error {
	return s.latch.write("set", func() error { return s.inner.Set(key, value) })
}

func (s latchedStableStore) Get(key []byte) (value []byte, err error) {
	err = s.latch.read(func() (e error) { value, e = s.inner.Get(key); return })
	return
}

// currentTermKey is the key under which hashicorp/raft keeps its term;
// it panics when writing it fails.
const currentTermKey = "CurrentTerm"

func (s latchedStableStore) SetUint64(key []byte, value uint64) error {
	err := s.latch.write("set", func() error { return s.inner.SetUint64(key, value) })
	if err != nil && string(key) == currentTermKey {
		return nil
	}
	return err
}

func (s latchedStableStore) GetUint64(key []byte) (value uint64, err error) {
	err = s.latch.read(func() (e error) { value, e = s.inner.GetUint64(key); return })
	return
}
