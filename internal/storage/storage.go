// Package storage holds nrigate's images and container root filesystems on
// go.podman.io/storage, and pulls images through go.podman.io/image/v5.
package storage

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/signature"
	istorage "go.podman.io/image/v5/storage"
	"go.podman.io/image/v5/transports/alltransports"
	"go.podman.io/image/v5/types"
	cstorage "go.podman.io/storage"
	stypes "go.podman.io/storage/types"

	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// Default driver names.
const (
	// DriverOverlay is the preferred graph driver.
	DriverOverlay = "overlay"
	// DriverVFS is the fallback graph driver used where overlay cannot mount.
	DriverVFS = "vfs"
)

// Sentinel errors; callers match them with errors.Is.
var (
	// ErrImageNotFound means no stored image matches the reference or ID.
	ErrImageNotFound = errors.New("image not found")
	// ErrContainerNotFound means no container root filesystem with that ID exists.
	ErrContainerNotFound = errors.New("container storage not found")
	// ErrInvalidReference means an image reference cannot be parsed.
	ErrInvalidReference = errors.New("invalid image reference")
)

// Options configure Open.
type Options struct {
	// Root is the graph root (layers, images, containers).
	Root string
	// RunRoot holds run-time state such as mount points.
	RunRoot string
	// Driver is the graph driver; empty means overlay. Overlay falls back to
	// vfs (with a logged reason) where it cannot mount.
	Driver string
	// DriverOptions are passed to the graph driver.
	DriverOptions []string
	// Logger receives the fallback reason; nil means logrus' standard logger.
	Logger logrus.FieldLogger
}

// Store wraps a containers/storage store with the operations the CRI needs.
type Store struct {
	store  cstorage.Store
	log    logrus.FieldLogger
	policy *signature.PolicyContext
}

// Image describes a stored image.
type Image struct {
	ID          string
	Names       []string
	Digests     []string
	Size        uint64
	Config      *imgspecv1.Image
	Annotations map[string]string
}

// FsInfo is the usage of the image filesystem.
type FsInfo struct {
	Mountpoint string
	UsedBytes  uint64
	InodesUsed uint64
	Timestamp  time.Time
}

// Open opens (creating if needed) the store. With the overlay driver (the
// default) it falls back to vfs where overlay cannot work, logging why.
func Open(opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = logrus.StandardLogger()
	}
	if opts.Root == "" || opts.RunRoot == "" {
		return nil, errors.New("storage: root and runroot must be set")
	}
	so := stypes.StoreOptions{
		GraphRoot:          opts.Root,
		RunRoot:            opts.RunRoot,
		GraphDriverName:    opts.Driver,
		GraphDriverOptions: opts.DriverOptions,
	}
	if so.GraphDriverName == "" {
		so.GraphDriverName = DriverOverlay
	}
	st, err := cstorage.GetStore(so)
	if err != nil && so.GraphDriverName == DriverOverlay {
		log.WithError(err).WithField("driver", DriverVFS).Warn("overlay storage driver unavailable, falling back to vfs")
		so.GraphDriverName = DriverVFS
		so.GraphDriverOptions = nil
		st, err = cstorage.GetStore(so)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: open store at %s (driver %s): %w", opts.Root, so.GraphDriverName, err)
	}
	pol, err := signature.NewPolicyContext(&signature.Policy{
		Default: signature.PolicyRequirements{signature.NewPRInsecureAcceptAnything()},
	})
	if err != nil {
		_, _ = st.Shutdown(false)
		return nil, fmt.Errorf("storage: signature policy: %w", err)
	}
	log.WithFields(logrus.Fields{"driver": st.GraphDriverName(), "root": opts.Root}).Info("storage opened")
	return &Store{store: st, log: log, policy: pol}, nil
}

// Driver returns the graph driver in use.
func (s *Store) Driver() string { return s.store.GraphDriverName() }

// Root returns the graph root.
func (s *Store) Root() string { return s.store.GraphRoot() }

// Shutdown releases the store; mounted root filesystems stay mounted.
func (s *Store) Shutdown() error {
	_ = s.policy.Destroy()
	_, err := s.store.Shutdown(false)
	return err
}

// parseSource turns a CRI image string into a source reference and the name
// it should be stored under.
func parseSource(ref string) (types.ImageReference, string, error) {
	if ref == "" {
		return nil, "", fmt.Errorf("%w: empty", ErrInvalidReference)
	}
	if i := strings.Index(ref, ":"); i > 0 {
		if tr := alltransports.TransportFromImageName(ref); tr != nil && tr.Name() != docker.Transport.Name() {
			src, err := alltransports.ParseImageName(ref)
			if err == nil && strings.Trim(src.StringWithinTransport(), ":") == "" {
				err = errors.New("no path")
			}
			if err != nil {
				return nil, "", fmt.Errorf("%w: %q: %v", ErrInvalidReference, ref, err)
			}
			return src, localName(src), nil
		}
		if strings.HasPrefix(ref, "docker://") {
			ref = strings.TrimPrefix(ref, "docker://")
		}
	}
	named, err := normalize(ref)
	if err != nil {
		return nil, "", err
	}
	src, err := docker.NewReference(named)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %q: %v", ErrInvalidReference, ref, err)
	}
	return src, named.String(), nil
}

// isTransportRef reports whether ref names a non-registry transport
// (oci-archive:, oci:, docker-archive:, dir:...).
func isTransportRef(ref string) bool {
	tr := alltransports.TransportFromImageName(ref)
	return tr != nil && tr.Name() != docker.Transport.Name()
}

func normalize(ref string) (reference.Named, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrInvalidReference, ref, err)
	}
	return reference.TagNameOnly(named), nil
}

// localName is the name an image from a non-registry transport is stored
// under: its own docker reference if it has one, else the full image name
// the OCI layout's index records for it (org.opencontainers.image.ref.name),
// else localhost/<file>:<tag>.
func localName(src types.ImageReference) string {
	if dr := src.DockerReference(); dr != nil {
		return reference.TagNameOnly(dr).String()
	}
	within := src.StringWithinTransport()
	if n := indexRefName(src.Transport().Name(), within); n != "" {
		return n
	}
	path, tag := within, "latest"
	if i := strings.LastIndex(within, ":"); i > 0 && !strings.Contains(within[i:], "/") {
		path = within[:i]
		if within[i+1:] != "" {
			tag = within[i+1:]
		}
	}
	base := filepath.Base(path)
	for _, ext := range []string{".tar.gz", ".tgz", ".tar", ".oci"} {
		base = strings.TrimSuffix(base, ext)
	}
	name := "localhost/" + strings.ToLower(base) + ":" + tag
	if _, err := reference.ParseNormalizedNamed(name); err != nil {
		return "localhost/image:" + tag
	}
	return name
}

// PullImage copies ref into the store and returns the stored image. ref may
// be a docker reference (with or without docker://) or a containers transport
// such as oci-archive:PATH or oci:PATH:TAG. The image is stored under the
// resolved name and, for transports, also under the exact string asked for.
func (s *Store) PullImage(ctx context.Context, ref string) (*Image, error) {
	src, name, err := parseSource(ref)
	if err != nil {
		return nil, err
	}
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrInvalidReference, name, err)
	}
	dst, err := istorage.Transport.NewStoreReference(s.store, named, "")
	if err != nil {
		return nil, fmt.Errorf("storage: destination for %q: %w", name, err)
	}
	sys := &types.SystemContext{}
	if _, err := copy.Image(ctx, s.policy, dst, src, &copy.Options{SourceCtx: sys, DestinationCtx: sys}); err != nil {
		return nil, fmt.Errorf("pull %q: %w", ref, err)
	}
	img, err := s.store.Image(name)
	if err != nil {
		return nil, fmt.Errorf("pull %q: stored image %q: %w", ref, name, err)
	}
	// Only the image's own name is stored: a transport string such as
	// oci-archive:PATH is not a repository tag (crictl images would show
	// repository "oci-archive"); lookup resolves it to the name instead.
	return s.ImageStatus(ctx, img.ID)
}

// lookup finds a stored image by ID, ID prefix, exact name or normalized name.
func (s *Store) lookup(ref string) (*cstorage.Image, error) {
	if ref == "" {
		return nil, fmt.Errorf("%w: empty reference", ErrImageNotFound)
	}
	if img, err := s.store.Image(strings.TrimPrefix(ref, "sha256:")); err == nil {
		return img, nil
	}
	if named, err := normalize(ref); err == nil {
		if img, err := s.store.Image(named.String()); err == nil {
			return img, nil
		}
	} else if isTransportRef(ref) {
		// The transport string a client pulled with (oci-archive:PATH):
		// the image is stored under the name that source gives it.
		if _, name, err := parseSource(ref); err == nil {
			if img, err := s.store.Image(name); err == nil {
				return img, nil
			}
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrImageNotFound, ref)
}

// ImageStatus returns the stored image matching ref.
func (s *Store) ImageStatus(ctx context.Context, ref string) (*Image, error) {
	img, err := s.lookup(ref)
	if err != nil {
		return nil, err
	}
	return s.describe(ctx, img)
}

func (s *Store) describe(ctx context.Context, img *cstorage.Image) (*Image, error) {
	out := &Image{ID: img.ID, Names: append([]string(nil), img.Names...)}
	for _, d := range img.Digests {
		out.Digests = append(out.Digests, d.String())
	}
	if size, err := s.store.ImageSize(img.ID); err == nil && size > 0 {
		out.Size = uint64(size)
	}
	ref, err := istorage.Transport.NewStoreReference(s.store, nil, img.ID)
	if err != nil {
		return nil, fmt.Errorf("storage: reference image %s: %w", img.ID, err)
	}
	src, err := ref.NewImage(ctx, &types.SystemContext{})
	if err != nil {
		return nil, fmt.Errorf("storage: open image %s: %w", img.ID, err)
	}
	defer src.Close()
	cfg, err := src.OCIConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("storage: image %s config: %w", img.ID, err)
	}
	out.Config = cfg
	if m, err := src.Inspect(ctx); err == nil {
		out.Annotations = m.Labels
	}
	return out, nil
}

// ListImages returns every stored image.
func (s *Store) ListImages(ctx context.Context) ([]*Image, error) {
	imgs, err := s.store.Images()
	if err != nil {
		return nil, fmt.Errorf("storage: list images: %w", err)
	}
	out := make([]*Image, 0, len(imgs))
	for i := range imgs {
		d, err := s.describe(ctx, &imgs[i])
		if err != nil {
			s.log.WithError(err).WithField("image", imgs[i].ID).Warn("skipping unreadable image")
			continue
		}
		out = append(out, d)
	}
	return out, nil
}

// RemoveImage deletes the image matching ref with its unused layers.
func (s *Store) RemoveImage(ref string) error {
	img, err := s.lookup(ref)
	if err != nil {
		return err
	}
	if _, err := s.store.DeleteImage(img.ID, true); err != nil {
		return fmt.Errorf("storage: remove image %s: %w", img.ID, err)
	}
	return nil
}

// ImageFsInfo reports the space and inodes used under the graph root.
func (s *Store) ImageFsInfo() (*FsInfo, error) {
	root := s.store.GraphRoot()
	info := &FsInfo{Mountpoint: root, Timestamp: time.Now()}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			// Mounted or vanishing entries are not ours to count.
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			info.UsedBytes += uint64(st.Blocks) * 512
		}
		info.InodesUsed++
		if d.IsDir() && d.Name() == "merged" {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: walk %s: %w", root, err)
	}
	return info, nil
}

// CreateContainer creates a container root filesystem from image imageID.
func (s *Store) CreateContainer(id, name, imageID string) error {
	img, err := s.lookup(imageID)
	if err != nil {
		return err
	}
	if _, err := s.store.CreateContainer(id, []string{name}, img.ID, "", "", nil); err != nil {
		return fmt.Errorf("storage: create container %s: %w", id, err)
	}
	return nil
}

// Mount mounts the container's root filesystem and returns its path.
func (s *Store) Mount(id string) (string, error) {
	p, err := s.store.Mount(id, "")
	if err != nil {
		if !s.ContainerExists(id) {
			return "", fmt.Errorf("%w: %s", ErrContainerNotFound, id)
		}
		return "", fmt.Errorf("storage: mount %s: %w", id, err)
	}
	return p, nil
}

// Unmount unmounts the container's root filesystem.
func (s *Store) Unmount(id string) error {
	if _, err := s.store.Unmount(id, true); err != nil {
		if errors.Is(err, cstorage.ErrContainerUnknown) || errors.Is(err, cstorage.ErrLayerUnknown) {
			return nil
		}
		return fmt.Errorf("storage: unmount %s: %w", id, err)
	}
	return nil
}

// DeleteContainer unmounts and deletes the container's root filesystem. A
// container that does not exist is not an error, so cleanup can be repeated.
func (s *Store) DeleteContainer(id string) error {
	_ = s.Unmount(id)
	if err := s.store.DeleteContainer(id); err != nil {
		if errors.Is(err, cstorage.ErrContainerUnknown) || errors.Is(err, cstorage.ErrNotAContainer) {
			return nil
		}
		return fmt.Errorf("storage: delete container %s: %w", id, err)
	}
	return nil
}

// ContainerExists reports whether a container root filesystem with id exists.
func (s *Store) ContainerExists(id string) bool {
	_, err := s.store.Container(id)
	return err == nil
}

// indexRefName returns the ref.name annotation of the only manifest in an
// oci or oci-archive layout, when it is a full image name (not just a tag)
// and the reference names no image of its own.
func indexRefName(transport, within string) string {
	path, image, _ := strings.Cut(within, ":")
	if image != "" {
		return ""
	}
	var data []byte
	switch transport {
	case "oci":
		b, err := os.ReadFile(filepath.Join(path, "index.json"))
		if err != nil {
			return ""
		}
		data = b
	case "oci-archive":
		data = readTarMember(path, "index.json")
	}
	var idx imgspecv1.Index
	if len(data) == 0 || json.Unmarshal(data, &idx) != nil || len(idx.Manifests) != 1 {
		return ""
	}
	n := idx.Manifests[0].Annotations[imgspecv1.AnnotationRefName]
	if !strings.ContainsAny(n, "/") {
		return ""
	}
	named, err := reference.ParseNormalizedNamed(n)
	if err != nil {
		return ""
	}
	return reference.TagNameOnly(named).String()
}

// readTarMember returns the content of one small file of a tar archive.
func readTarMember(path, name string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			return nil
		}
		if strings.TrimPrefix(h.Name, "./") == name {
			b, err := io.ReadAll(io.LimitReader(tr, 1<<20))
			if err != nil {
				return nil
			}
			return b
		}
	}
}
