package doclinks

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// A link found in a Markdown file.
type link struct {
	line   int
	target string
}

var (
	// fence opens or closes a fenced code block.
	fence = regexp.MustCompile("^ {0,3}(```|~~~)")
	// codeSpan is inline code, whose text is not Markdown.
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	// inline is an inline link or image: [text](target) or [text](target "title").
	inline = regexp.MustCompile(`!?\[[^\]]*\]\(\s*(<[^>]*>|[^)\s]*)(?:\s+"[^"]*")?\s*\)`)
	// reference is a reference definition: [label]: target.
	reference = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*(\S+)`)
	// atxHeading is a # heading; its closing #s are not part of the text.
	atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}(?:\s+(.*?))?(?:\s+#+)?\s*$`)
	// setextUnderline underlines the line above it as a heading.
	setextUnderline = regexp.MustCompile(`^ {0,3}(=+|-+)\s*$`)
	// htmlAnchor is an anchor made by HTML: <a name="x"> or <a id="x">.
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	// mdLink is a Markdown link inside a heading: only its text counts.
	mdLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	// lineAnchor is GitHub's anchor for lines of a file that is not Markdown.
	lineAnchor = regexp.MustCompile(`^L\d+(-L\d+)?$`)
	// scheme starts a URL with a scheme.
	scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// prose returns the file's lines with fenced code blocks blanked, so that code
// is neither read for links nor for headings, and line numbers stay.
func prose(text string) []string {
	lines := strings.Split(text, "\n")
	in := ""
	for i, l := range lines {
		if m := fence.FindStringSubmatch(l); m != nil {
			if in == "" {
				in = m[1]
			} else if m[1] == in {
				in = ""
			}
			lines[i] = ""
			continue
		}
		if in != "" {
			lines[i] = ""
		}
	}
	return lines
}

// links returns the links of a Markdown file, outside code.
func links(text string) []link {
	lines := prose(text)
	for i, l := range lines {
		lines[i] = codeSpan.ReplaceAllString(l, "``")
	}
	body := strings.Join(lines, "\n")
	var out []link
	for _, re := range []*regexp.Regexp{inline, reference} {
		for _, m := range re.FindAllStringSubmatchIndex(body, -1) {
			target := strings.TrimSuffix(strings.TrimPrefix(body[m[2]:m[3]], "<"), ">")
			out = append(out, link{line: 1 + strings.Count(body[:m[0]], "\n"), target: target})
		}
	}
	return out
}

// anchors returns the anchors of a Markdown file: one per heading, as GitHub makes
// them (a repeated heading gets -1, -2, …), and those of HTML <a name|id> tags.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	add := func(heading string) {
		s := slug(heading)
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	lines := prose(text)
	for i, l := range lines {
		for _, m := range htmlAnchor.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
		if m := atxHeading.FindStringSubmatch(l); m != nil && strings.HasPrefix(strings.TrimLeft(l, " "), "#") {
			add(m[1])
			continue
		}
		if i > 0 && setextUnderline.MatchString(l) && strings.TrimSpace(lines[i-1]) != "" &&
			!strings.HasPrefix(strings.TrimLeft(lines[i-1], " "), "#") && !strings.Contains(lines[i-1], "|") {
			add(lines[i-1])
		}
	}
	return out
}

// slug is GitHub's anchor for a heading: the text as shown (links by their text,
// code without its backticks, no emphasis stars), lowercased, every character but
// letters, digits, spaces, '-' and '_' dropped, and spaces made '-'.
func slug(heading string) string {
	text := mdLink.ReplaceAllString(strings.TrimSpace(heading), "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checker checks the links of the Markdown files under root, reading each target
// page's anchors once.
type checker struct {
	root    string
	anchors map[string]map[string]bool // by absolute path of a Markdown file
}

func newChecker(root string) *checker {
	return &checker{root: root, anchors: map[string]map[string]bool{}}
}

// check returns what is wrong with target, a link in the Markdown file at file (an
// absolute path), or nil.
func (c *checker) check(file, target string) error {
	if target == "" {
		return fmt.Errorf("empty link")
	}
	if scheme.MatchString(target) {
		return external(target)
	}
	p, frag, _ := strings.Cut(target, "#")
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	p, err := url.PathUnescape(p)
	if err != nil {
		return fmt.Errorf("path %q: %v", p, err)
	}
	dest := file
	if p != "" {
		if strings.HasPrefix(p, "/") {
			dest = filepath.Join(c.root, filepath.FromSlash(p)) // GitHub: from the repository's root
		} else {
			dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(p))
		}
		if rel, err := filepath.Rel(c.root, dest); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("%s is outside the repository", p)
		}
		if _, err := os.Stat(dest); err != nil {
			return fmt.Errorf("%s does not exist", p)
		}
	}
	if frag == "" {
		return nil
	}
	if path.Ext(dest) != ".md" {
		if lineAnchor.MatchString(frag) {
			return nil
		}
		return fmt.Errorf("#%s: %s is not Markdown, so it has only line anchors (#L12, #L12-L20)", frag, p)
	}
	a, err := c.anchorsOf(dest)
	if err != nil {
		return err
	}
	if !a[frag] {
		return fmt.Errorf("#%s names no heading of %s", frag, c.rel(dest))
	}
	return nil
}

func (c *checker) anchorsOf(file string) (map[string]bool, error) {
	if a, ok := c.anchors[file]; ok {
		return a, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	c.anchors[file] = anchors(string(b))
	return c.anchors[file], nil
}

func (c *checker) rel(file string) string {
	if r, err := filepath.Rel(c.root, file); err == nil {
		return filepath.ToSlash(r)
	}
	return file
}

// external checks that an absolute URL is well-formed; it does not fetch it.
func external(target string) error {
	u, err := url.Parse(target)
	if err != nil {
		return fmt.Errorf("%q: %v", target, err)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" || strings.ContainsAny(u.Host, " <>\"") {
			return fmt.Errorf("%q: no host", target)
		}
		return nil
	case "mailto":
		if u.Opaque == "" {
			return fmt.Errorf("%q: no address", target)
		}
		return nil
	}
	return fmt.Errorf("%q: scheme %q is not http, https or mailto", target, u.Scheme)
}

// markdownFiles returns the Markdown files under root, outside hidden directories
// (.git, .ci) and testdata.
func markdownFiles(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".md") {
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// problems returns every broken link of the Markdown files under root, one line each
// ("docs/x.md:12: …").
func problems(root string) ([]string, error) {
	files, err := markdownFiles(root)
	if err != nil {
		return nil, err
	}
	c := newChecker(root)
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, l := range links(string(b)) {
			if err := c.check(f, l.target); err != nil {
				out = append(out, fmt.Sprintf("%s:%d: (%s): %v", c.rel(f), l.line, l.target, err))
			}
		}
	}
	return out, nil
}
