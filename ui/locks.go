package ui

import (
	"errors"
	"net/http"

	"github.com/workq/workq/admin"
)

// locksView is the locks page: each kvlock bucket's holders, and the limiters.
type locksView struct {
	Buckets  []bucketView
	Limiters []admin.LimiterInfo
}

type bucketView struct {
	Name    string
	Entries []admin.LockEntry
	Err     string
}

// locksPage shows the held locks and semaphore slots of every kvlock bucket, and
// the rate limiters' permits.
func (h *handler) locksPage(w http.ResponseWriter, r *http.Request) {
	bs, err := h.adm.LockBuckets(r.Context())
	if err != nil {
		h.failFor(w, r, err)
		return
	}
	var v locksView
	for _, b := range bs {
		es, err := h.adm.Locks(r.Context(), b)
		bv := bucketView{Name: b, Entries: es}
		if errors.Is(err, admin.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			bv.Err = err.Error()
		}
		v.Buckets = append(v.Buckets, bv)
	}
	if v.Limiters, err = h.adm.Limiters(r.Context()); err != nil {
		h.failFor(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "locks", "Locks", v)
}
