package server

// AccessOf returns the access kind of every RPC s serves, by full method
// name: what the gRPC server registered, each with the rule it was
// registered under. The authorization matrix test drives every one.
func AccessOf(s *Server) map[string]Access {
	out := make(map[string]Access, len(s.rules))
	for m, r := range s.rules {
		out[m] = r.Access
	}
	return out
}

// SessionMethods returns the unary RPCs s serves in a session
// (djinn.v1.Session/Open), by full method name.
func SessionMethods(s *Server) map[string]bool {
	out := make(map[string]bool, len(s.sessionMethods))
	for m := range s.sessionMethods {
		out[m] = true
	}
	return out
}
