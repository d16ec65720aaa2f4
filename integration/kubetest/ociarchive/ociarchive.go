// Package ociarchive writes a container image as an OCI image-layout
// archive of one uncompressed layer, which containerd loads without a
// registry or a Docker engine (ctr -n k8s.io images import FILE). Pace's
// tests build their worker images with it from static binaries.
package ociarchive

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// Media types of the OCI image specification.
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar"
)

// File is a regular file of an image's layer.
type File struct {
	Path string      // absolute, e.g. /usr/local/bin/pace
	Mode os.FileMode // permission bits; 0 means 0o755
	Data []byte
}

// Link is a symbolic link of an image's layer, e.g. /bin/sh → busybox.
type Link struct {
	Path, Target string
}

// Image is what Write puts in the archive.
type Image struct {
	// Name is the reference containerd stores it under, e.g.
	// pace.local/worker:dev (the annotation io.containerd.image.name).
	Name       string
	Files      []File
	Entrypoint []string
	Cmd        []string
	// Env defaults to a PATH holding /usr/local/bin, /usr/bin and /bin.
	Env []string
	// Dirs are empty directories writable by any user, sticky as /tmp is
	// (mount points, or places a non-root worker may write); the parents
	// of Files and Dirs are created in any case, root's, mode 0755.
	Dirs  []string
	Links []Link
}

// BinaryFile reads the file at src as the executable dst of an image.
func BinaryFile(dst, src string) (File, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return File{}, err
	}
	return File{Path: dst, Mode: 0o755, Data: data}, nil
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Write writes img to w as a tar archive in the OCI image layout.
func Write(w io.Writer, img Image) error {
	if img.Name == "" {
		return fmt.Errorf("ociarchive: the image has no name")
	}
	layer, err := layer(img)
	if err != nil {
		return err
	}
	layerDesc := describe(mediaLayer, layer)
	env := img.Env
	if env == nil {
		env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	}
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Entrypoint": img.Entrypoint, "Cmd": img.Cmd, "Env": env},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDesc.Digest}},
	})
	if err != nil {
		return err
	}
	configDesc := describe(mediaConfig, config)
	manifest, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaManifest,
		"config": configDesc, "layers": []descriptor{layerDesc}})
	if err != nil {
		return err
	}
	manifestDesc := describe(mediaManifest, manifest)
	manifestDesc.Annotations = map[string]string{"io.containerd.image.name": img.Name}
	if i := strings.LastIndex(img.Name, ":"); i > strings.LastIndex(img.Name, "/") {
		manifestDesc.Annotations["org.opencontainers.image.ref.name"] = img.Name[i+1:]
	}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex,
		"manifests": []descriptor{manifestDesc}})
	if err != nil {
		return err
	}

	tw := tar.NewWriter(w)
	entries := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(manifestDesc), manifest},
		{blobPath(configDesc), config},
		{blobPath(layerDesc), layer},
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: epoch}); err != nil {
			return err
		}
	}
	for _, e := range entries {
		if err := writeFile(tw, e.name, 0o644, e.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// epoch stamps every entry, so that the same files make the same digests.
var epoch = time.Unix(0, 0)

// layer is the uncompressed tar of img's files and directories, parents
// first, owned by root.
func layer(img Image) ([]byte, error) {
	dirs := map[string]bool{}
	open := map[string]bool{}
	var addDir func(string)
	addDir = func(d string) {
		if d == "/" || d == "." || dirs[d] {
			return
		}
		addDir(path.Dir(d))
		dirs[d] = true
	}
	for _, d := range img.Dirs {
		addDir(path.Clean(d))
		open[path.Clean(d)] = true
	}
	for _, f := range img.Files {
		if !path.IsAbs(f.Path) {
			return nil, fmt.Errorf("ociarchive: file %q: want an absolute path", f.Path)
		}
		addDir(path.Dir(path.Clean(f.Path)))
	}
	for _, l := range img.Links {
		if !path.IsAbs(l.Path) {
			return nil, fmt.Errorf("ociarchive: link %q: want an absolute path", l.Path)
		}
		addDir(path.Dir(path.Clean(l.Path)))
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		mode := int64(0o755)
		if open[d] {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: mode, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	for _, f := range img.Files {
		mode := f.Mode
		if mode == 0 {
			mode = 0o755
		}
		if err := writeFile(tw, strings.TrimPrefix(path.Clean(f.Path), "/"), int64(mode.Perm()), f.Data); err != nil {
			return nil, err
		}
	}
	for _, l := range img.Links {
		h := &tar.Header{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(path.Clean(l.Path), "/"), Linkname: l.Target, Mode: 0o777, ModTime: epoch}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeFile(tw *tar.Writer, name string, mode int64, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: epoch}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func describe(media string, data []byte) descriptor {
	sum := sha256.Sum256(data)
	return descriptor{MediaType: media, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data))}
}

func blobPath(d descriptor) string { return "blobs/sha256/" + strings.TrimPrefix(d.Digest, "sha256:") }
