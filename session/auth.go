package session

import (
	"time"

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
// scopes applies at its next request, and one that removes it cuts the
// connection at its next request.

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
// reading is paused; welcome runs there on success.
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
		identity, outcome := s.checkCredentials(auth, gate, remote, mechanism, material, peer)
		if identity == nil {
			delay := security.DefaultFailureDelay
			if gate != nil {
				delay = gate.Failed(remote)
			}
			s.cfg.Audit.Record(security.AuditEvent{Peer: remote, Action: "auth", Outcome: outcome, Detail: mechanismName(mechanism)})
			time.Sleep(delay)
			e := notAuthorized()
			e.Closes = true
			_ = s.conn.Write(wire.Append(nil, requestID, e))
			_ = s.conn.Close()
			return
		}
		if gate != nil {
			gate.Succeeded(remote)
		}
		s.cfg.Audit.Record(security.AuditEvent{Peer: remote, Identity: identity.Name, Action: "auth", Outcome: "ok", Detail: identity.Mechanism})
		s.identity = identity
		s.quota = auth.Quota(identity)
		welcome()
		s.conn.ResumeReading()
	}()
}

// checkCredentials returns the identity, or nil and the audit outcome.
func (s *session) checkCredentials(auth *security.Authorizer, gate *security.Gate, remote string, mechanism uint8, material []byte, peer string) (*security.Identity, string) {
	if gate != nil && gate.LockedOut(remote) {
		return nil, "locked_out"
	}
	credentials, err := wire.DecodeAuth(mechanism, material)
	if err != nil {
		return nil, "malformed"
	}
	identity, err := auth.Authenticate(credentials, peer)
	if err != nil {
		return nil, "failed"
	}
	return identity, "ok"
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

// authorize checks one request: nil when allowed (or no auth is
// configured); a permission_denied error for this request; or, when the
// identity was removed from the config, not_authorized with closes set:
// the caller ends the connection with it (s.fatal).
func (s *session) authorize(scope security.Scope, stream []byte) (deny *wire.Error, closes bool) {
	auth := s.cfg.Auth
	if auth == nil || s.identity == nil {
		return nil, false
	}
	identity, ok := auth.Current(s.identity)
	if !ok {
		s.cfg.Audit.Record(security.AuditEvent{Peer: s.conn.RemoteAddr(), Identity: s.identity.Name, Action: scope.String(), Outcome: "removed"})
		return notAuthorized(), true
	}
	if identity != s.identity {
		s.identity = identity
		s.quota = auth.Quota(identity)
	}
	if identity.Allowed(scope, string(stream)) {
		return nil, false
	}
	s.cfg.Audit.Record(security.AuditEvent{Peer: s.conn.RemoteAddr(), Identity: identity.Name, Action: scope.String(), Outcome: "denied", Detail: string(stream)})
	return wire.NewError(wire.CodePermissionDenied, "identity %q has no %s permission on stream %q", identity.Name, scope, stream), false
}

// refused answers a request the identity may not make and reports
// whether it was refused; err ends the connection (identity removed).
func (s *session) refused(scope security.Scope, stream []byte, requestID uint32) (bool, error) {
	deny, closes := s.authorize(scope, stream)
	switch {
	case deny == nil:
		return false, nil
	case closes:
		return true, s.fatal(requestID, deny)
	}
	s.reply(requestID, deny)
	return true, nil
}

// chargeQuota spends the identity's publish quota on one record.
func (s *session) chargeQuota(size int) *wire.Error {
	if s.quota == nil {
		return nil
	}
	wait := s.quota.Take(size)
	if wait == 0 {
		return nil
	}
	e := wire.NewError(wire.CodeQuotaExceeded, "identity %q is over its publish quota; retry after %v", s.identity.Name, wait)
	e.RetryAfter = wait
	return e
}

// auditAdmin records an admin request.
func (s *session) auditAdmin(action, detail string) {
	name := ""
	if s.identity != nil {
		name = s.identity.Name
	}
	s.cfg.Audit.Record(security.AuditEvent{Peer: s.conn.RemoteAddr(), Identity: name, Action: action, Outcome: "requested", Detail: detail})
}

// auditUnauthenticatedEnd records a connection that ended before its
// Hello was answered: a TLS handshake that failed (wrong CA, expired or
// missing client certificate, TLS 1.2) or a handshake timeout.
func (s *session) auditUnauthenticatedEnd(outcome, detail string) {
	if s.handshook || s.identity != nil {
		return
	}
	s.cfg.Audit.Record(security.AuditEvent{Peer: s.conn.RemoteAddr(), Action: "handshake", Outcome: outcome, Detail: detail})
}
