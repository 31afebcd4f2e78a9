package main

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

func newUnmountCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "unmount MOUNTPOINT",
		Short: "Unmount a dsmount mount (the daemon then exits)",
		Args:  exactArgs(1, "MOUNTPOINT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return unmount(args[0])
		},
	}
}

func unmount(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return usagef("%s: %w", dir, err)
	}
	err = syscall.Unmount(abs, 0)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EINVAL):
		return fmt.Errorf("%s is not a mount point", abs)
	case errors.Is(err, syscall.ENOENT):
		return usagef("%s does not exist", abs)
	case errors.Is(err, syscall.EBUSY):
		return fmt.Errorf("%s is busy: close the files open in it first", abs)
	case errors.Is(err, syscall.EPERM):
		// Not root: fusermount3 may unmount a mount this user made.
		out, ferr := exec.Command("fusermount3", "-u", abs).CombinedOutput()
		if ferr != nil {
			return fmt.Errorf("unmount %s: %s", abs, oneLine(string(out)))
		}
		return nil
	}
	return fmt.Errorf("unmount %s: %w", abs, err)
}
