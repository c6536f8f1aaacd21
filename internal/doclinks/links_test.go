package doclinks

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the module's root: the nearest directory up from the test's that
// holds go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}

// Every link of every Markdown file in the repository leads somewhere: a file or
// directory that exists, a heading of the page it names, or a well-formed URL.
func TestRepositoryLinks(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	files, err := markdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"README.md", "CONTRIBUTING.md", "BENCHMARKS.md", "docs/delivery.md"} {
		if !slices.Contains(files, filepath.Join(root, filepath.FromSlash(want))) {
			t.Errorf("%s is not among the files checked", want)
		}
	}
	broken, err := problems(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range broken {
		t.Error(p)
	}
}

// The checker finds each kind of broken link, and passes the good ones.
func TestCheckerFindsBrokenLinks(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/x\n")
	write("docs/page.md", "# Page\n\n## `workq ui`: the dashboard\n\n## Again\n\n## Again\n\nText\n----\n")
	write("main.go", "package main\n")
	write("README.md", strings.Join([]string{
		"[good](docs/page.md) [good](docs/page.md#workq-ui-the-dashboard) [good](docs/page.md#again-1)",
		"[good](docs/page.md#text) [good](main.go#L1) [good](docs/) [good](#top) ![good](main.go)",
		"[good](https://example.com/a?b#c) [good](mailto:ada@example.com)",
		"<a name=\"top\"></a>",
		"",
		"```",
		"[ignored](inside-a-code-block.md)",
		"```",
		"`[ignored](inside-code.md)`",
		"",
		"[missing file](docs/nope.md)",
		"[missing anchor](docs/page.md#nope)",
		"[missing anchor here](#nope)",
		"[no line anchor](main.go#main)",
		"[outside](../elsewhere.md)",
		"[no host](https:///path)",
		"[odd scheme](ftp://example.com/x)",
		"[wrapped",
		"text](docs/page.md#again-2)",
		"[ref]: docs/missing-ref.md",
	}, "\n"))

	got, err := problems(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md:11: (docs/nope.md)",
		"README.md:12: (docs/page.md#nope)",
		"README.md:13: (#nope)",
		"README.md:14: (main.go#main)",
		"README.md:15: (../elsewhere.md)",
		"README.md:16: (https:///path)",
		"README.md:17: (ftp://example.com/x)",
		"README.md:18: (docs/page.md#again-2)",
		"README.md:20: (docs/missing-ref.md)",
	}
	if len(got) != len(want) {
		t.Errorf("found %d broken links, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w) }) {
			t.Errorf("not found: %s", w)
		}
	}
}

// Anchors are spelled as GitHub spells them.
func TestSlug(t *testing.T) {
	t.Parallel()
	for heading, want := range map[string]string{
		"Worker options worth knowing":          "worker-options-worth-knowing",
		"`workq ui`: the dashboard":             "workq-ui-the-dashboard",
		"What happens to a firing…":             "what-happens-to-a-firing",
		"Tests, CI, benchmarks":                 "tests-ci-benchmarks",
		"The record's protocol fields":          "the-records-protocol-fields",
		"Limits across **all** workers":         "limits-across-all-workers",
		"See [the protocol](delivery.md) first": "see-the-protocol-first",
		"max_running and rate-window":           "max_running-and-rate-window",
		"Über Größe":                            "über-größe",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}
