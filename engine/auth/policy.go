package auth

import "slices"

// Anonymous is the principal of a client that did not log in, as Kafka
// names it.
const Anonymous = "User:ANONYMOUS"

// Policy decides what a principal may do. Every door korvet has (the
// Kafka listeners, the HTTP side) asks the same Policy, so that one
// principal has the same rights whichever way it comes in.
type Policy struct {
	// Store holds the ACLs; it may be nil only when ACLs are off.
	Store *Store
	// ACLs turns authorization on. Off, everyone may do everything
	// (korvet's default on a trusted network).
	ACLs bool
	// SuperUsers ("User:name") may do everything, ACLs or not.
	SuperUsers []string
}

// Super reports whether principal is a super user.
func (p *Policy) Super(principal string) bool {
	return slices.Contains(p.SuperUsers, principal)
}

// Allowed reports whether principal, connecting from host (an IP), may do
// op on the named resource. It is always true with ACLs off and for
// super users.
func (p *Policy) Allowed(principal, host string, op Operation, rt ResourceType, name string) bool {
	if !p.ACLs || p.Super(principal) {
		return true
	}
	return p.Store.Authorize(principal, host, op, rt, name)
}

// AllowedCluster is Allowed for the cluster resource.
func (p *Policy) AllowedCluster(principal, host string, op Operation) bool {
	return p.Allowed(principal, host, op, ResCluster, ClusterName)
}
