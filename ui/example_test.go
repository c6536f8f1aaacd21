package ui_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/embedded"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/ui"
)

// Mount the dashboard under /workq in a service's own mux, read-only and behind a
// token.
func Example() {
	srv, err := embedded.Run() // a real program connects to its NATS servers
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	p, err := producer.New(context.Background(), js, "emails")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := p.Enqueue(context.Background(), []byte("hello"), producer.ID("welcome-1")); err != nil {
		log.Fatal(err)
	}

	adm, err := admin.New(js)
	if err != nil {
		log.Fatal(err)
	}
	dashboard, err := ui.New(adm, ui.Prefix("/workq"), ui.ReadOnly(), ui.Token("s3cret"))
	if err != nil {
		log.Fatal(err)
	}
	defer dashboard.Close() // stops its sampler
	mux := http.NewServeMux()
	mux.Handle("/workq/", dashboard)
	web := httptest.NewServer(mux)
	defer web.Close()

	req, _ := http.NewRequest(http.MethodGet, web.URL+"/workq/queues/emails/jobs/welcome-1", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, strings.Contains(string(page), "<h1>Job welcome-1</h1>"))
	// Output: 200 true
}
