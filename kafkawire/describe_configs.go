package kafkawire

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
)

// handleDescribeConfigs describes topics (every config korvet knows, with
// its source and, on request, synonyms and documentation) and the broker
// (the broker-level defaults in force).
func handleDescribeConfigs(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, rr := range req.Resources {
			sr := kmsg.NewDescribeConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
			want := func(name string) bool {
				if rr.ConfigNames == nil {
					return true
				}
				for _, n := range rr.ConfigNames {
					if n == name {
						return true
					}
				}
				return false
			}
			switch rr.ResourceType {
			case kmsg.ConfigResourceTypeTopic:
				t := c.s.eng.Topic(rr.ResourceName)
				if t == nil {
					sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
					sr.ErrorMessage = errMsg(fmt.Errorf("unknown topic %q", rr.ResourceName))
					break
				}
				for _, d := range engine.ConfigDefs() {
					if want(d.Name) {
						sr.Configs = append(sr.Configs, c.s.topicConfig(req, t, d))
					}
				}
			case kmsg.ConfigResourceTypeBroker:
				if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(c.s.opts.NodeID)) {
					sr.ErrorCode = kerr.InvalidRequest.Code
					sr.ErrorMessage = errMsg(fmt.Errorf("broker %q: this is broker %d", rr.ResourceName, c.s.opts.NodeID))
					break
				}
				for _, d := range engine.ConfigDefs() {
					if d.Broker == "" || !want(d.Broker) {
						continue
					}
					v, src := c.s.eng.BrokerDefault(d.Name)
					cf := kmsg.NewDescribeConfigsResponseResourceConfig()
					cf.Name, cf.Value, cf.ReadOnly = d.Broker, &v, true
					cf.Source = kmsg.ConfigSource(configSource(src))
					cf.IsDefault = src == engine.SourceDefault
					cf.ConfigType = configType(d)
					if req.IncludeDocumentation {
						doc := d.Doc
						cf.Documentation = &doc
					}
					sr.Configs = append(sr.Configs, cf)
				}
			case kmsg.ConfigResourceTypeGroupConfig:
				sr.Configs, sr.ErrorCode, sr.ErrorMessage = c.groupConfigs(ctx, req, rr.ResourceName, want)
			default:
				sr.ErrorCode = kerr.InvalidRequest.Code
				sr.ErrorMessage = errMsg(fmt.Errorf("resource type %v is not supported", rr.ResourceType))
			}
			resp.Resources = append(resp.Resources, sr)
		}
		return resp
	}
}

func (s *Server) topicConfig(req *kmsg.DescribeConfigsRequest, t *engine.Topic, d engine.ConfigDef) kmsg.DescribeConfigsResponseResourceConfig {
	v, src := t.Config(d.Name)
	cf := kmsg.NewDescribeConfigsResponseResourceConfig()
	cf.Name, cf.Value = d.Name, &v
	cf.Source = kmsg.ConfigSource(configSource(src))
	cf.IsDefault = src == engine.SourceDefault
	cf.ConfigType = configType(d)
	if req.IncludeDocumentation {
		doc := d.Doc
		cf.Documentation = &doc
	}
	if req.IncludeSynonyms {
		// Kafka lists the value at each level that sets it, most
		// specific first.
		if tv, ok := t.Configs()[d.Name]; ok {
			cf.ConfigSynonyms = append(cf.ConfigSynonyms, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: d.Name, Value: &tv, Source: kmsg.ConfigSourceDynamicTopicConfig})
		}
		if d.Broker != "" {
			if bv, src := s.eng.BrokerDefault(d.Name); src == engine.SourceStaticBroker {
				cf.ConfigSynonyms = append(cf.ConfigSynonyms, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: d.Broker, Value: &bv, Source: kmsg.ConfigSourceStaticBrokerConfig})
			}
			dv := d.Default
			cf.ConfigSynonyms = append(cf.ConfigSynonyms, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: d.Broker, Value: &dv, Source: kmsg.ConfigSourceDefaultConfig})
		}
	}
	return cf
}

// configType is the type DescribeConfigs v3+ reports.
func configType(d engine.ConfigDef) kmsg.ConfigType {
	switch {
	case d.Name == "cleanup.policy":
		return kmsg.ConfigTypeList
	case d.Default == "true" || d.Default == "false":
		return kmsg.ConfigTypeBoolean
	case d.Name == "min.cleanable.dirty.ratio":
		return kmsg.ConfigTypeDouble
	}
	if _, err := strconv.ParseInt(d.Default, 10, 64); err == nil {
		return kmsg.ConfigTypeLong
	}
	return kmsg.ConfigTypeString
}

// aclDescribeConfigs: DESCRIBE_CONFIGS on each resource.
func aclDescribeConfigs(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.DescribeConfigsRequest)
	var out []refused[kmsg.DescribeConfigsRequestResource]
	req.Resources, out = sift(req.Resources, func(r *kmsg.DescribeConfigsRequestResource) int16 {
		return c.configCode(auth.OpDescribeConfigs, r.ResourceType, r.ResourceName)
	})
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeConfigsResponse)
		for _, o := range out {
			sr := kmsg.NewDescribeConfigsResponseResource()
			sr.ResourceType, sr.ResourceName, sr.ErrorCode = o.item.ResourceType, o.item.ResourceName, o.code
			resp.Resources = append(resp.Resources, sr)
		}
	}
}
