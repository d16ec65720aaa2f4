package ociarchive_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/pace-platform/pace/integration/kubetest/ociarchive"
)

// TestWrite reads an archive back: every blob's name is its digest, the
// index names the image, and the layer holds the file with its mode under
// its parent directories.
func TestWrite(t *testing.T) {
	img := ociarchive.Image{Name: "pace.local/worker:dev", Entrypoint: []string{"/usr/local/bin/w"}, Dirs: []string{"/tmp"},
		Links: []ociarchive.Link{{Path: "/bin/sh", Target: "/usr/local/bin/w"}},
		Files: []ociarchive.File{{Path: "/usr/local/bin/w", Mode: 0o755, Data: []byte("#!/bin/true\n")}}}
	var a, b bytes.Buffer
	if err := ociarchive.Write(&a, img); err != nil {
		t.Fatal(err)
	}
	if err := ociarchive.Write(&b, img); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("the same image wrote two different archives")
	}
	files := map[string][]byte{}
	tr := tar.NewReader(&a)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		files[h.Name] = data
		if hex, ok := strings.CutPrefix(h.Name, "blobs/sha256/"); ok && hex != "" {
			if got := sum(data); got != hex {
				t.Errorf("blob %s has digest %s", h.Name, got)
			}
		}
	}
	var index struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json %s: %v", files["index.json"], err)
	}
	if got := index.Manifests[0].Annotations["io.containerd.image.name"]; got != img.Name {
		t.Errorf("image name %q, want %q", got, img.Name)
	}
	var manifest struct {
		Layers []struct{ Digest string }
	}
	if err := json.Unmarshal(files["blobs/sha256/"+strings.TrimPrefix(index.Manifests[0].Digest, "sha256:")], &manifest); err != nil || len(manifest.Layers) != 1 {
		t.Fatalf("manifest: %v", err)
	}
	layer := tar.NewReader(bytes.NewReader(files["blobs/sha256/"+strings.TrimPrefix(manifest.Layers[0].Digest, "sha256:")]))
	var names []string
	for {
		h, err := layer.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name+" "+strings.TrimLeft(h.FileInfo().Mode().String(), "-")+h.Linkname)
	}
	want := "bin/ drwxr-xr-x,tmp/ dtrwxrwxrwx,usr/ drwxr-xr-x,usr/local/ drwxr-xr-x,usr/local/bin/ drwxr-xr-x,usr/local/bin/w rwxr-xr-x,bin/sh Lrwxrwxrwx/usr/local/bin/w"
	if got := strings.Join(names, ","); got != want {
		t.Errorf("layer:\n got %s\nwant %s", got, want)
	}
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
