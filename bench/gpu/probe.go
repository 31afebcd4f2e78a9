package gpu

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsmount/dsmount/test/testenv"
)

// probeResult is what the machine offers, found before any pass: whether
// FUSE can mount, how page caches can be dropped, the disk under the work
// directory, the GPU as nvidia-smi sees it.
type probeResult struct {
	Root        bool   `json:"root"`
	DevFuse     string `json:"dev_fuse"`    // "ok", or why /dev/fuse can't be opened
	Fusermount3 string `json:"fusermount3"` // its path, or ""
	FuseOK      bool   `json:"fuse_ok"`
	FuseNote    string `json:"fuse_note"`
	DropMethod  string `json:"drop_method"` // "drop_caches" or "fadvise"
	DropNote    string `json:"drop_note"`
	WorkDir     string `json:"work_dir"`
	WorkFS      string `json:"work_fs"`
	WorkFree    int64  `json:"work_free_bytes"`
	NvidiaSMI   string `json:"nvidia_smi"`
	CPUs        int    `json:"cpus"`
	MemBytes    int64  `json:"mem_bytes"`
}

// Drop methods.
const (
	dropCaches  = "drop_caches"
	dropFadvise = "fadvise"
)

func probe(work string) probeResult {
	p := probeResult{Root: os.Geteuid() == 0, WorkDir: work, CPUs: runtime.NumCPU()}
	if f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0); err != nil {
		p.DevFuse = err.Error()
	} else {
		f.Close()
		p.DevFuse = "ok"
	}
	p.Fusermount3, _ = exec.LookPath("fusermount3")
	switch {
	case p.DevFuse != "ok":
		p.FuseNote = "no FUSE: " + p.DevFuse + "; the dsmount passes are skipped"
	case p.Root:
		p.FuseOK = true
		p.FuseNote = "root: dsmount mounts with mount(2) itself (go-fuse's DirectMount), fusermount3 not needed"
	case p.Fusermount3 != "":
		p.FuseOK = true
		p.FuseNote = "not root: dsmount mounts through " + p.Fusermount3
	default:
		p.FuseNote = "not root and no fusermount3: dsmount can't mount; the dsmount passes are skipped"
	}
	if err := testenv.DropCaches(); err != nil {
		p.DropMethod = dropFadvise
		p.DropNote = fmt.Sprintf("drop_caches refused (%v): posix_fadvise(DONTNEED) on every file of the trees instead (pages only; dentries and inodes stay)", err)
	} else {
		p.DropMethod = dropCaches
		p.DropNote = "sync; echo 3 > /proc/sys/vm/drop_caches before each pass (pages, dentries, inodes)"
	}
	var st unix.Statfs_t
	if err := unix.Statfs(work, &st); err == nil {
		p.WorkFS, p.WorkFree = fsName(st.Type), int64(st.Bavail)*st.Bsize
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		p.MemBytes = int64(si.Totalram) * int64(si.Unit)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nvidia-smi", "--query-gpu=name,memory.total,driver_version,pcie.link.gen.max,pcie.link.width.max",
		"--format=csv,noheader").CombinedOutput()
	p.NvidiaSMI = strings.TrimSpace(string(out))
	if err != nil {
		p.NvidiaSMI = fmt.Sprintf("nvidia-smi: %v %s", err, p.NvidiaSMI)
	}
	return p
}

func (p probeResult) lines() []string {
	return []string{
		fmt.Sprintf("FUSE: %s", p.FuseNote),
		fmt.Sprintf("page cache: %s", p.DropNote),
		fmt.Sprintf("work dir %s: %s, %.1f GB free", p.WorkDir, p.WorkFS, float64(p.WorkFree)/1e9),
		fmt.Sprintf("%d CPUs, %.1f GB of memory; GPU: %s", p.CPUs, float64(p.MemBytes)/1e9, p.NvidiaSMI),
	}
}

// fsName names a statfs magic number (the common ones; tmpfs matters: its
// pages can't be dropped, so a "page cache dropped" pass there is not one).
func fsName(magic int64) string {
	switch magic {
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x01021994:
		return "tmpfs (pages can't be dropped: point TMPDIR at a disk)"
	case 0x794c7630:
		return "overlayfs"
	case 0x2fc12fc1:
		return "zfs"
	case 0x6969:
		return "nfs"
	}
	return fmt.Sprintf("fs magic %#x", magic)
}

// dropper drops page caches before a pass: the whole machine's with
// drop_caches, or, where that is refused (a container), each file's pages
// of the trees given with posix_fadvise(DONTNEED).
type dropper struct {
	method string
	trees  []string
}

func newDropper(method string, trees ...string) *dropper {
	return &dropper{method: method, trees: trees}
}

// add is one more tree whose pages the fadvise method drops (a cache
// directory, a mount).
func (d *dropper) add(tree string) { d.trees = append(d.trees, tree) }

func (d *dropper) drop() error {
	if d.method == dropCaches {
		return testenv.DropCaches()
	}
	unix.Sync()
	for _, tree := range d.trees {
		err := filepath.WalkDir(tree, func(p string, e fs.DirEntry, err error) error {
			if err != nil || !e.Type().IsRegular() {
				return err
			}
			return testenv.DropPageCache(p)
		})
		if err != nil {
			return fmt.Errorf("dropping the pages of %s: %w", tree, err)
		}
	}
	return nil
}

// residency is the mean share of pages cached of up to n files of paths
// under root (spread over the list): how cold a pass starts.
func residency(root string, paths []string, n int) float64 {
	if len(paths) == 0 || n < 1 {
		return 0
	}
	step := max(1, len(paths)/n)
	var sum float64
	var k int
	for i := 0; i < len(paths) && k < n; i += step {
		if r, err := testenv.Residency(filepath.Join(root, filepath.FromSlash(paths[i]))); err == nil {
			sum += r
			k++
		}
	}
	if k == 0 {
		return 0
	}
	return sum / float64(k)
}
