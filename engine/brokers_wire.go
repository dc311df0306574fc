package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/korvet/korvet/resp"
)

// StoredGroupNames lists every consumer group and share group stored in
// Redis, sorted and each once, whichever broker coordinates it: the
// status page computes Coordinator over them to show how groups spread.
func (e *Engine) StoredGroupNames(ctx context.Context) ([]string, error) {
	var names []string
	for _, key := range []string{e.k.Groups(), e.k.ShareGroups()} {
		r, err := e.rc.Do(ctx, "HKEYS", key)
		if err == nil {
			err = r.Err()
		}
		if err != nil {
			return nil, fmt.Errorf("list stored groups (%s): %w", key, err)
		}
		r.ForEach(func(g resp.Reply) bool {
			names = append(names, string(g.Bytes()))
			return true
		})
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
