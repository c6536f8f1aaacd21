// Package doclinks holds a test, and nothing else: it checks the links of every
// Markdown file in the repository (README.md, CONTRIBUTING.md, BENCHMARKS.md,
// docs/…), so that moving or renaming a page or a heading cannot leave a link behind.
//
// A relative link must name a file or directory that exists, and its #anchor a
// heading of the target page, spelled as GitHub spells heading anchors. External
// http and https links are only checked to be well-formed: the test runs without
// a network. It runs with the rest of the suite (go test ./...), so CI runs it.
package doclinks
