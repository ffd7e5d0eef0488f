package console

import (
	"io/fs"
	"regexp"
	"testing"
)

// TestAssetsFetchNothingFromElsewhere: the console is served whole by the
// binary: no page, script or style sheet loads anything by an absolute or
// protocol-relative URL (a framework from a CDN, a font, an image).
func TestAssetsFetchNothingFromElsewhere(t *testing.T) {
	elsewhere := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9-]+(\.[a-z0-9-]+)+[/:]|(src|href)\s*=\s*["']?(https?:)?//|url\(\s*["']?(https?:)?//|@import`)
	n := 0
	err := fs.WalkDir(assets, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		b, err := fs.ReadFile(assets, path)
		if err != nil {
			return err
		}
		if m := elsewhere.Find(b); m != nil {
			t.Errorf("%s loads %q from elsewhere: vendor it into assets", path, m)
		}
		return nil
	})
	if err != nil || n < 3 {
		t.Fatalf("walking the assets: %v (%d files), want the page, its script and its style sheet", err, n)
	}
}
