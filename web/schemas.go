package web

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/engine/registry"
)

// The schema registry as the status page, /api/v1 and /metrics show it;
// the registry's own REST API is NewRegistry's.

// apiSchemas lists the subjects r's principal may read (READ on the
// subject's topic, topicOf: the registry API's own rule), with their versions, latest id, type, compatibility
// and mode.
func (s *server) apiSchemas(w http.ResponseWriter, r *http.Request) {
	if s.opts.Registry == nil {
		writeJSON(w, http.StatusOK, []registry.SubjectInfo{})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	subjects, err := s.opts.Registry.Subjects(ctx)
	if err != nil {
		s.log.Warn("list schema subjects", "err", err)
		writeError(w, http.StatusInternalServerError, "list schema subjects: "+err.Error())
		return
	}
	out := make([]registry.SubjectInfo, 0, len(subjects))
	for _, sub := range subjects {
		if !s.mayTopic(r, auth.OpRead, topicOf(sub.Subject)) {
			continue
		}
		if sub.Versions == nil {
			sub.Versions = []int{}
		}
		out = append(out, sub)
	}
	writeJSON(w, http.StatusOK, out)
}

var (
	descSchemaSubjects = desc("korvet_schema_subjects", "Live subjects in the schema registry.")
	descSchemaVersions = desc("korvet_schema_versions", "Live (not soft-deleted) schema versions in the schema registry, all subjects together.")
)

// schemaCollector counts the registry's subjects and versions at scrape
// time (/metrics already needs DESCRIBE on the cluster, which sees all).
type schemaCollector struct {
	s   *server
	ctx context.Context
}

func (c *schemaCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSchemaSubjects
	ch <- descSchemaVersions
}

func (c *schemaCollector) Collect(ch chan<- prometheus.Metric) {
	reg := c.s.opts.Registry
	if reg == nil {
		return
	}
	subjects, err := reg.Subjects(c.ctx)
	if err != nil {
		c.s.log.Warn("schema registry metrics", "err", err)
		return
	}
	versions := 0
	for _, sub := range subjects {
		versions += len(sub.Versions)
	}
	ch <- prometheus.MustNewConstMetric(descSchemaSubjects, prometheus.GaugeValue, float64(len(subjects)))
	ch <- prometheus.MustNewConstMetric(descSchemaVersions, prometheus.GaugeValue, float64(versions))
}
