package kafkawire

import (
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metrics counts the Kafka traffic of a Server. Create it with NewMetrics
// on the process's registry and pass it in Options; a nil *Metrics counts
// nothing.
type Metrics struct {
	apis     map[int16]*apiMetrics
	inFlight prometheus.Gauge
	produced prometheus.Counter
	fetched  prometheus.Counter
	// aheadUsed and aheadUnused count fetch read-aheads that answered a
	// fetch and those dropped.
	aheadUsed, aheadUnused prometheus.Counter

	// Running totals for the status page, which samples them for its
	// rate charts; Prometheus counters cannot be read back cheaply.
	totals struct {
		requests, bytesIn, bytesOut, produced, fetched atomic.Int64
		aheadUsed, aheadUnused                         atomic.Int64
	}
}

type apiMetrics struct {
	requests prometheus.Counter
	latency  prometheus.Observer
	bytesIn  prometheus.Counter
	bytesOut prometheus.Counter
}

// Totals are a Server's traffic since start.
type Totals struct {
	Requests        int64
	BytesIn         int64 // request frames, size prefix included
	BytesOut        int64 // response frames
	ProducedRecords int64 // records in produce requests that were accepted
	FetchedRecords  int64 // records in fetch responses
	// ReadAheadUsed and ReadAheadUnused count fetch read-aheads that
	// answered a fetch and those dropped (asked for otherwise, outdated,
	// idle, in the budget's way, or their connection closed).
	ReadAheadUsed, ReadAheadUnused int64
}

// latencyBuckets span a pipelined produce (sub-millisecond) to a long
// poll that waits out its max wait (up to maxFetchWait).
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// NewMetrics registers korvet's Kafka metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "korvet_kafka_requests_total", Help: "Kafka requests answered, by API.",
	}, []string{"api"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "korvet_kafka_request_duration_seconds", Help: "Time from reading a Kafka request to having its response ready, by API (fetches include their wait).",
		Buckets: latencyBuckets,
	}, []string{"api"})
	bytesIn := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "korvet_kafka_received_bytes_total", Help: "Bytes of Kafka request frames received, by API.",
	}, []string{"api"})
	bytesOut := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "korvet_kafka_sent_bytes_total", Help: "Bytes of Kafka response frames sent, by API.",
	}, []string{"api"})
	m := &Metrics{
		apis: make(map[int16]*apiMetrics),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "korvet_kafka_requests_in_flight", Help: "Kafka requests being answered.",
		}),
		produced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "korvet_kafka_produced_records_total", Help: "Records in produce requests that korvet accepted (acks=0 ones included).",
		}),
		fetched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "korvet_kafka_fetched_records_total", Help: "Records sent in fetch responses.",
		}),
	}
	ahead := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "korvet_kafka_fetch_read_ahead_total", Help: "Fetch read-aheads, by result: used (a fetch took it) or unused (dropped).",
	}, []string{"result"})
	m.aheadUsed, m.aheadUnused = ahead.WithLabelValues("used"), ahead.WithLabelValues("unused")
	// Children exist from the start, so every API shows up at zero and
	// the hot path never builds a label set.
	for key := range apiTable() {
		name := key.Name()
		m.apis[key.Int16()] = &apiMetrics{
			requests: requests.WithLabelValues(name),
			latency:  latency.WithLabelValues(name),
			bytesIn:  bytesIn.WithLabelValues(name),
			bytesOut: bytesOut.WithLabelValues(name),
		}
	}
	reg.MustRegister(requests, latency, bytesIn, bytesOut, m.inFlight, m.produced, m.fetched, ahead)
	return m
}

// Totals returns the traffic counted so far.
func (m *Metrics) Totals() Totals {
	if m == nil {
		return Totals{}
	}
	return Totals{
		Requests:        m.totals.requests.Load(),
		BytesIn:         m.totals.bytesIn.Load(),
		BytesOut:        m.totals.bytesOut.Load(),
		ProducedRecords: m.totals.produced.Load(),
		FetchedRecords:  m.totals.fetched.Load(),
		ReadAheadUsed:   m.totals.aheadUsed.Load(),
		ReadAheadUnused: m.totals.aheadUnused.Load(),
	}
}

// readAhead counts a fetch read-ahead used or dropped.
func (m *Metrics) readAhead(used bool) {
	switch {
	case m == nil:
	case used:
		m.aheadUsed.Inc()
		m.totals.aheadUsed.Add(1)
	default:
		m.aheadUnused.Inc()
		m.totals.aheadUnused.Add(1)
	}
}

// started is called when a request has been read; the returned func is
// called with its response (nil when none is sent) once it is ready.
func (m *Metrics) started(key int16, req kmsg.Request, frameLen int) func(resp kmsg.Response, respFrameLen int) {
	if m == nil {
		return func(kmsg.Response, int) {}
	}
	a := m.apis[key]
	if a == nil {
		return func(kmsg.Response, int) {}
	}
	start := time.Now()
	m.inFlight.Inc()
	a.bytesIn.Add(float64(frameLen))
	m.totals.bytesIn.Add(int64(frameLen))
	return func(resp kmsg.Response, respFrameLen int) {
		a.latency.Observe(time.Since(start).Seconds())
		a.requests.Inc()
		m.inFlight.Dec()
		m.totals.requests.Add(1)
		if respFrameLen > 0 {
			a.bytesOut.Add(float64(respFrameLen))
			m.totals.bytesOut.Add(int64(respFrameLen))
		}
		switch r := req.(type) {
		case *kmsg.ProduceRequest:
			if n := producedRecords(r, resp); n > 0 {
				m.produced.Add(float64(n))
				m.totals.produced.Add(n)
			}
		case *kmsg.FetchRequest:
			if fr, ok := resp.(*kmsg.FetchResponse); ok {
				if n := fetchedRecords(fr); n > 0 {
					m.fetched.Add(float64(n))
					m.totals.fetched.Add(n)
				}
			}
		}
	}
}

// producedRecords counts the records of the partitions that the response
// accepted; with no response (acks=0) every partition counts.
func producedRecords(req *kmsg.ProduceRequest, resp kmsg.Response) int64 {
	pr, _ := resp.(*kmsg.ProduceResponse)
	var n int64
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			if pr != nil && !produceAccepted(pr, ti, pi, rp.Partition) {
				continue
			}
			n += batchRecords(rp.Records)
		}
	}
	return n
}

// produceAccepted finds the response partition for request topic ti,
// partition pi: the handler answers in request order, so the same indexes
// are checked first.
func produceAccepted(pr *kmsg.ProduceResponse, ti, pi int, partition int32) bool {
	if ti < len(pr.Topics) && pi < len(pr.Topics[ti].Partitions) && pr.Topics[ti].Partitions[pi].Partition == partition {
		return pr.Topics[ti].Partitions[pi].ErrorCode == 0
	}
	return false
}

func fetchedRecords(r *kmsg.FetchResponse) int64 {
	var n int64
	for ti := range r.Topics {
		for pi := range r.Topics[ti].Partitions {
			if p := &r.Topics[ti].Partitions[pi]; p.ErrorCode == 0 {
				n += batchRecords(p.RecordBatches)
			}
		}
	}
	return n
}

// batchRecords adds up the record counts of the v2 record batches in b
// from their headers (base offset 8, length 4, epoch 4, magic 1, crc 4,
// attributes 2, last offset delta 4, timestamps 16, producer 14, then the
// count); older message sets and a truncated tail count as none.
func batchRecords(b []byte) int64 {
	const countAt, headerLen = 57, 61
	var n int64
	for len(b) >= headerLen {
		size := int(int32(binary.BigEndian.Uint32(b[8:]))) + 12
		if b[16] != 2 || size < headerLen || size > len(b) {
			break
		}
		if c := int32(binary.BigEndian.Uint32(b[countAt:])); c > 0 {
			n += int64(c)
		}
		b = b[size:]
	}
	return n
}
