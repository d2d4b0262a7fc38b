package session

import (
	"errors"
	"fmt"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/wire"
)

// Accounts at the door (docs/SECURITY.md, "Accounts"). The engine is
// account-agnostic; a session maps the names its peer sends, in its
// identity's account, to the engine's names (security.Namespace) right
// after the permission checks, which match the account's own names, and
// maps the engine's answers back, dropping whatever belongs to another
// account. Error messages are rewritten the same way, and only ever
// describe the requester's own names. Record subjects are data and stay
// as written; only the subjects a binding or a routed publish looks up
// carry the account's prefix, so routing never leaves the account.

// engineStream maps a stream name from the wire to the engine's.
func (s *session) engineStream(name []byte) ([]byte, *wire.Error) {
	if len(name) == 0 {
		return name, nil
	}
	if s.names.Plain() && name[0] != '.' && !security.Reserved(name) {
		return name, nil
	}
	out, err := s.names.AppendStream(nil, name)
	if err != nil {
		return nil, foreignName(err)
	}
	return out, nil
}

// engineName is engineStream that answers a refused name itself: err
// is non-nil when it did (the request is over, the connection is not).
func (s *session) engineName(name []byte, requestID uint32) ([]byte, error) {
	out, werr := s.engineStream(name)
	if werr != nil {
		s.reply(requestID, werr)
		return nil, werr
	}
	return out, nil
}

// readName maps the stream and group of a read (Consume, OpenGroup, Ack)
// to the engine's: an import ("ACCOUNT/STREAM" another account exports
// to this one) is the exporter's stream, and the group on it this
// account's own. The first read of an import on a connection is
// audited. It answers a refused name itself: err is non-nil when it did.
func (s *session) readName(stream, group []byte, requestID uint32) ([]byte, []byte, error) {
	account, name, isImport := security.CutImport(stream)
	if !isImport || s.names.Operator() {
		stream, err := s.engineName(stream, requestID)
		return stream, group, err
	}
	if s.identity == nil || !s.identity.Imports(string(stream)) {
		werr := foreignName(fmt.Errorf("%w: %q: no such stream, and no account exports it to this one", security.ErrForeignName, stream))
		s.reply(requestID, werr)
		return nil, nil, werr
	}
	engine, err := security.NamespaceOf(account).Stream(name)
	if err != nil {
		s.reply(requestID, foreignName(err))
		return nil, nil, err
	}
	if !s.imported[string(stream)] {
		if s.imported == nil {
			s.imported = map[string]bool{}
		}
		s.imported[string(stream)] = true
		s.record(security.AuditEvent{Peer: s.conn.RemoteAddr(), Identity: s.identity.Name, Action: "import", Outcome: "ok",
			Detail: fmt.Sprintf("account %q reads %q", s.names.Account(), stream)})
	}
	return []byte(engine), security.ImportGroup(s.names.Account(), group), nil
}

// foreignName answers a name outside the account as the engine answers
// a stream that does not exist, so the answer tells nothing of other
// accounts.
func foreignName(err error) *wire.Error {
	return wire.NewError(wire.CodeNotFound, "%v", err)
}

// hide rewrites an error's message into the account's names (a copy: the
// error may be shared).
func (s *session) hide(e *wire.Error) *wire.Error {
	if e != nil && e.Code == wire.CodeNotLeader && s.capabilities&wire.CapCluster == 0 && (e.HasValue || e.Leader != "") {
		// A client without the cluster capability cannot decode the
		// leader field; the message still names the leader.
		stripped := *e
		stripped.HasValue, stripped.Value, stripped.Leader = false, 0, ""
		e = &stripped
	}
	if e == nil || s.names.Plain() {
		return e
	}
	hidden := *e
	hidden.Message = s.names.Hide(e.Message)
	return &hidden
}

// hideMessage is hide for an admin answer, which is a reply or an error.
func (s *session) hideMessage(m wire.Message) wire.Message {
	if e, ok := m.(*wire.Error); ok {
		return s.hide(e)
	}
	return m
}

// ownStreams keeps the account's streams, under their names in it.
func (s *session) ownStreams(streams []broker.StreamInfo) []broker.StreamInfo {
	own := streams[:0:0]
	for _, info := range streams {
		if name, ok := s.names.External(info.Name); ok {
			info.Name = name
			own = append(own, info)
		}
	}
	return own
}

// ownBindings keeps the bindings to the account's streams, under the
// account's names.
func (s *session) ownBindings(bindings []broker.Binding) []broker.Binding {
	own := bindings[:0:0]
	for _, binding := range bindings {
		stream, ok := s.names.External(binding.Stream)
		pattern, mine := s.names.ExternalPattern(binding.Pattern)
		if ok && mine {
			own = append(own, broker.Binding{Pattern: pattern, Stream: stream})
		}
	}
	return own
}

// errForeignRoute refuses a subject routed out of the account (a binding
// the account does not own matched): as if nothing had matched.
var errForeignRoute = errors.New("session: the subject routes outside the account")
