package kafkawire

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// DescribeAcls, CreateAcls and DeleteAcls manage the ACLs in Auth. They
// are offered only with Options.ACLs: without enforcement, stored ACLs
// would suggest a protection that is not there. Who may call them is
// decided by their rules: DESCRIBE or ALTER on the cluster.

// aclPattern is the pattern type of a request; v0 knows only literals.
func aclPattern(version int16, p kmsg.ACLResourcePatternType) auth.PatternType {
	if version == 0 {
		return auth.PatternLiteral
	}
	return auth.PatternType(p)
}
