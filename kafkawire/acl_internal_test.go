package kafkawire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestEveryAPIHasACLRule: with ACLs on, an API without a rule is refused
// to everyone but super users; a new API needs its rule in aclRule.
func TestEveryAPIHasACLRule(t *testing.T) {
	for key := range apiTable() {
		if aclRule(key) == nil {
			t.Errorf("%s (key %d) has no authorization rule in aclRule", kmsg.NameForKey(key), key)
		}
	}
}
