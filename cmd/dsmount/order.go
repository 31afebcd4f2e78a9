package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dsmount/dsmount/internal/control"
)

type orderFlags struct {
	job   string
	epoch int
	next  string
	end   bool
	json  bool
	pid   int
}

func newOrderCmd() *cobra.Command {
	var f orderFlags
	cmd := &cobra.Command{
		Use:   "order MOUNTPOINT --job NAME --epoch N FILE",
		Short: "Declare the order in which a job will read files this epoch",
		Long: `Declare a training job's sample order for one epoch: FILE lists paths
relative to the mount root, one per line, in the order the job will read them
('-': stdin). dsmount then fetches ahead of the job's readers in that order and,
when the cache is full, keeps what the declared orders of all jobs need soonest.
--next declares the following epoch's order too, so prefetch and eviction can
look across the epoch boundary. A new declaration for the same job replaces the
last one; a job that stops reading is forgotten after the daemon's
--job-timeout. Paths that are not files of the mount are skipped and reported;
repeats are left out (each file is read once per epoch).

The python/ package does this from a PyTorch Sampler; this command is for
anything else.`,
		Example: `  dsmount order /mnt/imagenet --job resnet --epoch 3 epoch3.txt
  python make_order.py | dsmount order /mnt/imagenet --job resnet --epoch 0 -
  dsmount order /mnt/imagenet --job resnet --end`,
		Args: func(cmd *cobra.Command, args []string) error {
			if f.end {
				if len(args) != 1 {
					return usagef("order --end takes only MOUNTPOINT (see 'dsmount order --help')")
				}
				return nil
			}
			if len(args) != 2 {
				return usagef("order takes MOUNTPOINT and FILE (see 'dsmount order --help')")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runOrder(cmd.Context(), args, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.job, "job", "", "the job's name, unique on the mount (required)")
	fl.IntVar(&f.epoch, "epoch", 0, "the epoch FILE is the order of")
	fl.StringVar(&f.next, "next", "", "a file with the next epoch's order ('-': stdin)")
	fl.BoolVar(&f.end, "end", false, "the job is done: forget its order")
	fl.IntVar(&f.pid, "pid", 0, "the training process: only its reads and its children's count for the job (default: reads of the declared files by anyone)")
	fl.BoolVar(&f.json, "json", false, "print the result as one JSON object")
	return cmd
}

func runOrder(ctx context.Context, args []string, f orderFlags) error {
	if f.job == "" {
		return usagef("order: --job NAME is required")
	}
	if f.epoch < 0 {
		return flagErrorf("epoch", "%d is negative", f.epoch)
	}
	abs, err := filepath.Abs(args[0])
	if err != nil {
		return usagef("%s: %w", args[0], err)
	}
	root, rel, err := control.Roots{}.Find(abs)
	if err != nil {
		return err
	}
	if rel != "." {
		return usagef("%s is not a mountpoint (the mount's root is %s)", args[0], root)
	}
	if f.pid < 0 {
		return flagErrorf("pid", "%d is negative", f.pid)
	}
	// This process exits at once: it can't own the job's reads.
	req := control.Request{Op: "order", Job: f.job, Epoch: f.epoch, End: f.end, PID: f.pid, Anonymous: f.pid == 0}
	if !f.end {
		if args[1] == "-" && f.next == "-" {
			return usagef("FILE and --next can't both be stdin")
		}
		if req.Paths, err = readOrderFile(args[1], args[1], root); err != nil {
			return err
		}
		if len(req.Paths) == 0 {
			return usagef("%s lists no paths", args[1])
		}
		if f.next != "" {
			if req.Next, err = readOrderFile(f.next, "--next", root); err != nil {
				return err
			}
		}
	}
	var res *control.OrderResult
	err = control.Call(ctx, root, req, func(ev control.Event) error {
		if ev.Order != nil {
			res = ev.Order
		}
		return nil
	})
	if err != nil {
		return err
	}
	if res == nil {
		return fmt.Errorf("the daemon serving %s gave no answer", root)
	}
	if f.json {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	if f.end {
		if res.Ended {
			fmt.Printf("job %s ended\n", f.job)
		} else {
			fmt.Printf("no job %s on %s\n", f.job, root)
		}
		return nil
	}
	fmt.Printf("job %s epoch %d: %d files declared", res.Job, res.Epoch, res.Declared)
	if res.NextDeclared > 0 {
		fmt.Printf(", %d for the next epoch", res.NextDeclared)
	}
	if res.Duplicates > 0 {
		fmt.Printf(", %d repeats left out", res.Duplicates)
	}
	fmt.Println()
	if res.Skipped > 0 {
		fmt.Fprintf(os.Stderr, "dsmount: %d paths skipped, e.g. %s\n", res.Skipped, strings.Join(res.SkippedExamples, "; "))
	}
	return nil
}

// readOrderFile reads a path list; absolute paths inside the mount are made
// relative to its root.
func readOrderFile(name, label, root string) ([]string, error) {
	paths, err := readPathList(name, label)
	if err != nil {
		return nil, err
	}
	prefix := root + string(filepath.Separator)
	for i, p := range paths {
		if !filepath.IsAbs(p) {
			continue
		}
		// The root itself is ".", which the daemon skips as a directory.
		if clean := filepath.Clean(p); clean == root {
			paths[i] = "."
		} else if rest, ok := strings.CutPrefix(clean, prefix); ok {
			paths[i] = rest
		}
	}
	return paths, nil
}
