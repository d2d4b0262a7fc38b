package session

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/wire"
)

// Authentication and authorization of sessions (docs/SECURITY.md).
//
// With Config.Auth set, Hello is checked off the reader (a password hash
// takes tens of milliseconds): reading pauses, a goroutine authenticates,
// and either answers Welcome and resumes, or waits the failure delay,
// writes the one uniform not_authorized error and closes. Each request
// afterwards is checked against the identity's scopes; the identity is
// looked up again in the config in force, so a reload that changes its
// scopes applies at its next request. A reload that removes the identity
// or gives its name another credential, and the expiry of its
// credential, cut the connection within security.RevocationInterval:
// the Authorizer tracks every authenticated session (revoke).

// notAuthorized is the only thing a failed peer learns.
func notAuthorized() *wire.Error {
	return wire.NewError(wire.CodeNotAuthorized, "not authorized")
}

// admit applies the pre-authentication gate to a new connection: a
// half-open slot (nil without a gate), which the gate may take back by
// evicting the connection while its handshake is pending.
func (h *Handler) admit(conn loop.Conn, handshake *handshakeGuard) (*security.Admission, error) {
	if h.cfg.Gate == nil {
		return nil, nil
	}
	admission, err := h.cfg.Gate.Admit(conn.RemoteAddr(), handshake.evict)
	if err != nil {
		h.cfg.Audit.Record(security.AuditEvent{Peer: conn.RemoteAddr(), Action: "connect", Outcome: "refused", Detail: err.Error()})
		return nil, err
	}
	return admission, nil
}

// releaseGate gives back the half-open slot once (authenticated, or gone).
func (s *session) releaseGate() {
	s.admission.Release()
	s.admission = nil
}

// authenticateHello checks Hello's credentials on a goroutine while
// reading is paused; welcome runs there on success. A failure is answered
// when the failure delay since the Hello has passed, whatever the check
// cost: an unknown user, a wrong password and a locked-out account take
// the same time to refuse.
func (s *session) authenticateHello(hello wire.Hello, requestID uint32, welcome func()) {
	auth, gate := s.cfg.Auth, s.cfg.Gate
	remote := s.conn.RemoteAddr()
	material := append([]byte(nil), hello.AuthMaterial...) // the frame goes back to the reader
	mechanism := hello.AuthMechanism
	peer := s.peerIdentity()
	s.conn.PauseReading()
	s.consumers.Add(1)
	go func() {
		defer s.consumers.Done()
		started := time.Now()
		answerAt := started.Add(security.DefaultFailureDelay)
		if gate != nil {
			answerAt = started.Add(gate.Options().FailureDelay)
		}
		attempt := checkCredentials(auth, gate, remote, mechanism, material, peer)
		if attempt.identity == nil {
			answerAt = later(answerAt, started.Add(auth.SlowestCheck()))
			if gate != nil {
				gate.Failed(remote, attempt.account)
			}
			// record waits for room in the audit queue: this peer, and
			// only it, waits for its failure to be on the record.
			s.record(security.AuditEvent{Peer: remote, Action: "auth", Outcome: attempt.outcome,
				Detail: mechanismName(mechanism) + attempt.detail, Username: attempt.username})
			time.Sleep(time.Until(answerAt))
			e := notAuthorized()
			e.Closes = true
			_ = s.conn.Write(wire.Append(nil, requestID, e))
			_ = s.conn.Close()
			return
		}
		identity := attempt.identity
		if gate != nil {
			gate.Succeeded(remote, attempt.account)
		}
		connection, err := auth.Connect(identity)
		if err != nil {
			s.refuseConnection(identity, requestID, err)
			return
		}
		s.record(security.AuditEvent{Peer: remote, Identity: identity.Name, Action: "auth", Outcome: "ok", Detail: identity.Mechanism})
		s.identity, s.connection = identity, connection
		s.names = security.NamespaceOf(identity.Account())
		s.quota = auth.PublishQuota(identity)
		s.untrack = auth.Track(identity, func(reason string) { s.revoke(identity.Name, reason) })
		welcome()
		s.conn.ResumeReading()
	}()
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// maxAuditedUsername bounds the username a failed login puts in the
// audit file (the wire allows 64 KiB).
const maxAuditedUsername = 256

// attempt is one authentication's result: the identity (nil on failure),
// the audit outcome, the account the gate counts it against, and the
// username it claimed.
type attempt struct {
	identity *security.Identity
	outcome  string
	account  string
	username string
	detail   string // appended to the mechanism in the audit event
}

// checkCredentials decodes and checks Hello's credentials.
func checkCredentials(auth *security.Authorizer, gate *security.Gate, remote string, mechanism uint8, material []byte, peer string) attempt {
	credentials, err := wire.DecodeAuth(mechanism, material)
	if err != nil {
		return attempt{outcome: "malformed"}
	}
	result := attempt{account: security.LockoutAccount(credentials, peer), username: credentials.Username}
	if len(result.username) > maxAuditedUsername {
		result.username = result.username[:maxAuditedUsername]
	}
	if gate != nil && gate.LockedOut(remote, result.account) {
		result.outcome = "locked_out"
		return result
	}
	if result.identity, err = auth.Authenticate(credentials, peer); err != nil {
		result.outcome = "failed"
		if errors.Is(err, security.ErrCredentialExpired) {
			// The right secret, too late: the peer hears what a wrong one
			// hears, the audit trail says which identity and since when.
			result.outcome = security.EndExpired
			result.detail = strings.TrimPrefix(err.Error(), security.ErrCredentialExpired.Error())
		}
		return result
	}
	result.outcome = "ok"
	return result
}

func mechanismName(mechanism uint8) string {
	switch mechanism {
	case wire.AuthNone:
		return "none"
	case wire.AuthToken:
		return "token"
	case wire.AuthPassword:
		return "password"
	case wire.AuthMTLS:
		return "mtls"
	}
	return "unknown"
}

// peerIdentity is the verified client certificate's identity, or "".
func (s *session) peerIdentity() string {
	secure, ok := s.conn.(loop.TLSConn)
	if !ok {
		return ""
	}
	state, ok := secure.TLSState()
	if !ok {
		return ""
	}
	identity, _ := security.PeerIdentity(state)
	return identity
}

// record puts an event on the audit trail from any goroutine of this
// connection. An essential event the full queue cannot take is never
// dropped: off the reader, the calling goroutine (this connection's own)
// waits for room; while Data runs, the reader never waits, so the event
// is held and the connection waits for it after the frame (holdForAudit).
func (s *session) record(event security.AuditEvent) {
	if s.cfg.Audit.TryRecord(event) {
		return
	}
	s.auditMu.Lock()
	if s.reading {
		s.auditHeld = append(s.auditHeld, event)
		s.auditMu.Unlock()
		return
	}
	s.auditMu.Unlock()
	s.cfg.Audit.Record(event)
}

// setReading marks Data running or done. Events held when Data ends
// (another goroutine's, after the last frame was handled) are recorded by
// a goroutine of their own, as their goroutine would have.
func (s *session) setReading(reading bool) {
	s.auditMu.Lock()
	s.reading = reading
	held := s.auditHeld
	s.auditHeld = nil
	s.auditMu.Unlock()
	if len(held) == 0 {
		return
	}
	s.consumers.Add(1)
	go func() {
		defer s.consumers.Done()
		for _, event := range held {
			s.cfg.Audit.Record(event)
		}
	}()
}

// takeHeld returns and clears the held events.
func (s *session) takeHeld() []security.AuditEvent {
	s.auditMu.Lock()
	defer s.auditMu.Unlock()
	held := s.auditHeld
	s.auditHeld = nil
	return held
}

// holdForAudit makes the connection whose frame caused audit events the
// full queue could not take wait until they are queued: reading pauses,
// a goroutine records them (waiting for room) and resumes reading. The
// reactor and every other connection go on; a peer that floods denied or
// admin requests slows only itself, and the trail loses none of them.
func (s *session) holdForAudit(held []security.AuditEvent, result outcome, err error) (outcome, error) {
	if result == outcomePaused {
		return result, err // the frame comes back and is handled again, its events with it
	}
	resume := err == nil // an error ends the connection: record, but never resume
	if resume {
		s.conn.PauseReading()
	}
	s.consumers.Add(1)
	go func() {
		defer s.consumers.Done()
		for _, event := range held {
			s.cfg.Audit.Record(event)
		}
		switch {
		case !resume:
		case result == outcomePauseAfter:
			s.out.whenDrained(s.conn.ResumeReading)
		default:
			s.conn.ResumeReading()
		}
	}()
	if err != nil {
		return result, err
	}
	return outcomeStop, nil
}

// authorize checks one request: nil when allowed (or no auth is
// configured); a permission_denied error for this request; or, when the
// identity was removed from the config, not_authorized with closes set:
// the caller ends the connection with it (s.fatal).
func (s *session) authorize(scope security.Scope, stream []byte) (deny *wire.Error, closes bool) {
	identity, removed := s.requester(scope)
	switch {
	case removed:
		return notAuthorized(), true
	case identity == nil || identity.Allowed(scope, string(stream)):
		return nil, false
	}
	return s.denied(identity, scope, string(stream)), false
}

// requester returns the identity a request is checked against, as the
// config in force has it: nil when no auth is configured; removed when
// the config no longer has it (audited; the caller cuts the connection).
// Reader goroutine only: it refreshes s.identity.
func (s *session) requester(scope security.Scope) (identity *security.Identity, removed bool) {
	auth := s.cfg.Auth
	if auth == nil || s.identity == nil {
		return nil, false
	}
	identity, ended := auth.Current(s.identity)
	if ended == "" && identity.Account() != s.names.Account() {
		ended = "moved" // to another account: its names mean other streams now
	}
	if ended != "" {
		if s.untrack != nil {
			s.untrack() // this request ends the session: the Authorizer need not
		}
		s.record(security.AuditEvent{Peer: s.conn.RemoteAddr(), Identity: s.identity.Name, Action: scope.String(), Outcome: ended})
		return nil, true
	}
	if identity != s.identity {
		s.identity = identity
		s.quota = auth.PublishQuota(identity)
	}
	return identity, false
}

// revokeGrace bounds how long a revoked session's last answer may take
// to be written before the connection is closed anyway (a peer that does
// not read).
const revokeGrace = 200 * time.Millisecond

// revoke ends the session of an identity removed, rotated or expired
// (reason): audited, answered not_authorized with closes set, closed. It
// runs on the Authorizer's goroutine, so the work moves to one of its
// own.
func (s *session) revoke(name, reason string) {
	go func() {
		stop := time.AfterFunc(revokeGrace, func() { _ = s.conn.Close() })
		e := notAuthorized()
		e.Closes = true
		_ = s.conn.Write(wire.Append(nil, 0, e))
		_ = s.conn.Close()
		stop.Stop()
		s.cfg.Logger.Info("closed a connection whose identity no longer holds", "remote", s.conn.RemoteAddr(),
			"identity", name, "reason", reason)
		s.cfg.Audit.Record(security.AuditEvent{Peer: s.conn.RemoteAddr(), Identity: name, Action: "session",
			Outcome: reason, Detail: "connection closed"})
	}()
}

// denied audits a refusal and returns its answer. Any goroutine.
func (s *session) denied(identity *security.Identity, scope security.Scope, stream string) *wire.Error {
	s.record(security.AuditEvent{Peer: s.conn.RemoteAddr(), Identity: identity.Name, Action: scope.String(), Outcome: "denied", Detail: stream})
	return wire.NewError(wire.CodePermissionDenied, "identity %q has no %s permission on stream %q", identity.Name, scope, stream)
}

// refused answers a request the identity may not make and reports
// whether it was refused; err ends the connection (identity removed).
func (s *session) refused(scope security.Scope, stream []byte, requestID uint32) (bool, error) {
	deny, closes := s.authorize(scope, stream)
	return s.answerRefusal(deny, closes, requestID)
}

// answerRefusal sends a refusal and reports whether there was one.
func (s *session) answerRefusal(deny *wire.Error, closes bool, requestID uint32) (bool, error) {
	switch {
	case deny == nil:
		return false, nil
	case closes:
		return true, s.fatal(requestID, deny)
	}
	s.reply(requestID, deny)
	return true, nil
}

// admitRequester checks only that the identity still exists, for a
// request whose streams are checked one by one as it runs (lists,
// unbind); it returns the identity to check them against (nil: no auth).
func (s *session) admitRequester(scope security.Scope, requestID uint32) (*security.Identity, bool, error) {
	identity, removed := s.requester(scope)
	if removed {
		return nil, true, s.fatal(requestID, notAuthorized())
	}
	return identity, false, nil
}

// sees reports whether identity (nil: no auth) holds scope on stream,
// without auditing: what a list leaves out is not a refusal. Any
// goroutine.
func sees(identity *security.Identity, scope security.Scope, stream string) bool {
	return identity == nil || identity.Allowed(scope, stream)
}

// rebinding checks, for the engine, that identity holds admin on each
// stream a binding change touches. The engine asks while it holds its
// binding lock, so the check only notes a refusal; audited answers the
// change and audits the refusal once the lock is released. Any goroutine
// (one rebinding per request).
type rebinding struct {
	session  *session
	identity *security.Identity
	refused  string
	denied   bool
}

func (r *rebinding) permit() broker.Permit {
	if r.identity == nil {
		return nil
	}
	return func(stream string) error {
		if name, own := r.session.names.External(stream); own && r.identity.Allowed(security.ScopeAdmin, name) {
			return nil
		}
		r.refused, r.denied = stream, true
		return errRebindRefused
	}
}

var errRebindRefused = errors.New("session: binding change refused")

// audited returns the engine's answer, or the permission_denied answer of
// a refused change. The answer does not name the stream refused (it may
// be one the identity cannot see); the audit event does.
func (r *rebinding) audited(bindings []broker.Binding, err error) ([]broker.Binding, error) {
	if !r.denied {
		return bindings, err
	}
	s := r.session
	s.record(security.AuditEvent{Peer: s.conn.RemoteAddr(), Identity: r.identity.Name, Action: security.ScopeAdmin.String(), Outcome: "denied", Detail: r.refused})
	return nil, wire.NewError(wire.CodePermissionDenied, "identity %q has no admin permission on a stream this binding change routes subjects to or away from", r.identity.Name)
}

// groupRefused answers a request on a consumer group that the auth
// config's group rules keep from this identity, and reports whether it
// did. It runs after refused, on the reader (s.identity is current).
func (s *session) groupRefused(verb security.GroupVerb, stream, group []byte, requestID uint32) bool {
	if s.cfg.Auth == nil || s.identity == nil || s.identity.MayUseGroup(verb, stream, group) {
		return false
	}
	s.record(security.AuditEvent{Peer: s.conn.RemoteAddr(), Identity: s.identity.Name, Action: "group." + verb.String(),
		Outcome: "denied", Detail: fmt.Sprintf("stream %q group %q", stream, group)})
	s.reply(requestID, wire.NewError(wire.CodePermissionDenied, "identity %q may not %s group %q of stream %q: a group rule of the auth config covers it and does not name the identity",
		s.identity.Name, verb, group, stream))
	return true
}

// filterRefused answers a Consume or OpenGroup whose subject filter the
// identity's subscribe subject rules do not allow, and reports whether it
// did. It runs after refused, on the reader (s.identity is current). A
// filter partly outside the rules is refused rather than narrowed: the
// consumer would otherwise miss records it asked for without knowing.
func (s *session) filterRefused(filter []byte, requestID uint32) bool {
	if s.cfg.Auth == nil || s.identity == nil {
		return false
	}
	err := s.identity.FilterAllowed(filter)
	if err == nil {
		return false
	}
	s.record(security.AuditEvent{Peer: s.conn.RemoteAddr(), Identity: s.identity.Name, Action: "subscribe", Outcome: "denied", Detail: fmt.Sprintf("filter %q", filter)})
	s.reply(requestID, wire.NewError(wire.CodePermissionDenied, "%v", err))
	return true
}

// subjectRefused refuses a record whose subject the identity's
// publish_subjects do not cover.
func (s *session) subjectRefused(subject []byte) *wire.Error {
	if s.cfg.Auth == nil || s.identity == nil || s.identity.SubjectAllowed(subject) {
		return nil
	}
	s.record(security.AuditEvent{Peer: s.conn.RemoteAddr(), Identity: s.identity.Name, Action: "publish", Outcome: "denied", Detail: "subject " + string(subject)})
	if len(subject) == 0 {
		return wire.NewError(wire.CodePermissionDenied, "identity %q publishes only records with a subject its publish_subjects cover; this one has none", s.identity.Name)
	}
	return wire.NewError(wire.CodePermissionDenied, "identity %q has no publish permission on subject %q", s.identity.Name, subject)
}

// auditOutcome records how an audited operation ended. Any goroutine.
func (s *session) auditOutcome(identity *security.Identity, action string, err error, detail string) {
	if s.cfg.Audit == nil {
		return
	}
	name, outcome := "", "ok"
	if identity != nil {
		name = identity.Name
	}
	if err != nil {
		outcome, detail = "failed", detail+": "+err.Error()
	}
	s.record(security.AuditEvent{Peer: s.conn.RemoteAddr(), Identity: name, Action: action, Outcome: outcome, Detail: detail})
}

// auditAdmin records an admin request.
func (s *session) auditAdmin(action, detail string) {
	name := ""
	if s.identity != nil {
		name = s.identity.Name
	}
	s.record(security.AuditEvent{Peer: s.conn.RemoteAddr(), Identity: name, Action: action, Outcome: "requested", Detail: detail})
}

// auditUnauthenticatedEnd records a connection that ended before its
// Hello was answered: a TLS handshake that failed (wrong CA, expired or
// missing client certificate, TLS 1.2) or a handshake timeout.
func (s *session) auditUnauthenticatedEnd(outcome, detail string) {
	if s.handshook || s.identity != nil {
		return
	}
	s.record(security.AuditEvent{Peer: s.conn.RemoteAddr(), Action: "handshake", Outcome: outcome, Detail: detail})
}
