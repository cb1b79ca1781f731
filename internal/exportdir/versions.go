package exportdir

import (
	"os"
	"slices"
	"strconv"
	"strings"
)

// ParseVersion returns the version a version directory's name gives: a
// positive integer written in canonical decimal, digits only without
// leading zeros or sign ("7", "1700000000"; not "07", "+7", "7.0"), so
// that a version and its directory name are one to one. ok is false for
// any other name.
func ParseVersion(name string) (version int64, ok bool) {
	if name == "" || name[0] == '0' || strings.TrimLeft(name, "0123456789") != "" {
		return 0, false
	}
	v, err := strconv.ParseInt(name, 10, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

// ScanVersions returns the version directories of baseDir, ascending, and
// the names of the other directories there that are not versions (by
// ParseVersion), sorted; hidden ones (".tmp-..." of an export being
// written) are left out of both. A base directory that does not exist
// has no versions.
func ScanVersions(baseDir string) (versions []int64, ignored []string, err error) {
	entries, err := os.ReadDir(baseDir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	for _, en := range entries {
		if !en.IsDir() || strings.HasPrefix(en.Name(), ".") {
			continue
		}
		if v, ok := ParseVersion(en.Name()); ok {
			versions = append(versions, v)
		} else {
			ignored = append(ignored, en.Name())
		}
	}
	slices.Sort(versions)
	return versions, ignored, nil // ReadDir sorts by name
}
