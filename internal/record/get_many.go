package record

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/wireid"
)

// maxGetMany is the most keys one GetMany request asks for: the server answers a
// multi-key direct get with at most 1024 messages.
const maxGetMany = 1000

// getManyTimeout bounds the wait for one GetMany request's answers: what it reads is
// an optimisation, and a caller reads what it lacks with Get.
const getManyTimeout = 2 * time.Second

// GetMany reads the records of ids in one direct get of many keys per up to 1000
// ids (the server's multi_last, 2.11+), where Get would make one request each. Any
// replica may answer, so a record may be older than the last write: GetMany is for
// a caller that writes by compare-and-set over what it read, which a stale record
// fails, and reads again then. Ids with no record, or a value that is not their
// record, are left out; so are all of a request the server does not answer as asked
// (an older server, a stream without direct gets), which the caller reads with Get.
func (s Store) GetMany(ctx context.Context, ids []string) map[string]*Record {
	out := make(map[string]*Record, len(ids))
	for len(ids) > 0 {
		n := min(len(ids), maxGetMany)
		s.getMany(ctx, ids[:n], out)
		ids = ids[n:]
	}
	return out
}

// getMany reads up to maxGetMany records into out.
func (s Store) getMany(ctx context.Context, ids []string, out map[string]*Record) {
	prefix := "$KV." + s.Bucket + "."
	bySubject := make(map[string]string, len(ids))
	subjects := make([]string, len(ids))
	for i, id := range ids {
		subjects[i] = prefix + wireid.Encode(id)
		bySubject[subjects[i]] = id
	}
	req, err := json.Marshal(struct {
		MultiLast []string `json:"multi_last"`
		Batch     int      `json:"batch"`
	}{subjects, len(subjects)})
	if err != nil {
		return
	}
	nc := s.JS.Conn()
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(apiPrefix(s.JS)+"DIRECT.GET.KV_"+s.Bucket, inbox, req); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, getManyTimeout)
	defer cancel()
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil || len(m.Data) == 0 && m.Header.Get("Status") != "" {
			return // the end of the batch (204), none found (404), refused, or gone
		}
		if isMarkerHeader(m.Header) {
			continue // a delete, purge or expiry marker
		}
		id, ok := bySubject[m.Header.Get(jetstream.SubjectHeader)]
		if !ok {
			continue
		}
		rev, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			continue
		}
		if r, err := Decode(id, m.Data, rev); err == nil {
			out[id] = r
		}
	}
}
