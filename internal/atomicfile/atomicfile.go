// Package atomicfile writes files that a crash leaves either whole or as they were: the
// bytes go to a temporary file in the same directory, are synced, and take the file's place
// by a rename (or a link, for a file created only if absent), whose directory is synced too.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrExist is returned by Create when the file is already there.
var ErrExist = fs.ErrExist

// Write replaces path with b (mode applies to a new file).
func Write(path string, b []byte, mode os.FileMode) error {
	tmp, err := temp(path, b, mode)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}

// Create writes b to path only if path does not exist yet; else it returns an error that
// wraps ErrExist and leaves the file as it is. Of processes that create at once, one wins.
func Create(path string, b []byte, mode os.FileMode) error {
	tmp, err := temp(path, b, mode)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w", path, ErrExist)
		}
		return err
	}
	return syncDir(filepath.Dir(path))
}

// temp writes b to a synced temporary file beside path and returns its name.
func temp(path string, b []byte, mode os.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	fail := func(err error) (string, error) { f.Close(); os.Remove(name); return "", err }
	if err := f.Chmod(mode); err != nil {
		return fail(err)
	}
	if _, err := f.Write(b); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

// syncDir syncs a directory, so that a rename or link in it survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}
