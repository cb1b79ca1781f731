package columns

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestHashBucketMatchesTensorFlowDocs checks string_to_hash_bucket_fast's
// example in TensorFlow's documentation of tf.strings.to_hash_bucket_fast:
// ["Hello", "TensorFlow", "2.x"] into 3 buckets is [0, 2, 2].
func TestHashBucketMatchesTensorFlowDocs(t *testing.T) {
	var got []int64
	for _, s := range []string{"Hello", "TensorFlow", "2.x"} {
		got = append(got, HashBucketID([]byte(s), 3))
	}
	if diff := cmp.Diff([]int64{0, 2, 2}, got); diff != "" {
		t.Errorf("hash buckets (-TensorFlow +got):\n%s", diff)
	}
}

// TestCrossHashMatchesTensorFlow checks the hashed cross against the
// outputs TensorFlow's sparse_cross_hashed tests pin (sparse_ops_test's
// test_hashed_*): the cross of "batch1-FC1-F1", "batch1-FC2-F1" and
// "batch1-FC3-F1".
func TestCrossHashMatchesTensorFlow(t *testing.T) {
	var hashes []uint64
	for _, s := range []string{"batch1-FC1-F1", "batch1-FC2-F1", "batch1-FC3-F1"} {
		hashes = append(hashes, Fingerprint64([]byte(s)))
	}
	for _, tc := range []struct {
		name    string
		key     uint64
		buckets int
		want    int64
	}{
		{"default key, 100 buckets", DefaultHashKey, 100, 83},
		{"default key, no buckets", DefaultHashKey, 0, 1971693436396284976},
		{"key+1, 100 buckets", DefaultHashKey + 1, 100, 31},
		{"key+1, no buckets", DefaultHashKey + 1, 0, 4847552627144134031},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := crossHash(tc.key, hashes, tc.buckets); got != tc.want {
				t.Errorf("cross hash = %d, TensorFlow's %d", got, tc.want)
			}
		})
	}
}

// farmhashStrings are the strings Fingerprint64 is checked on: empty,
// short, every length from 1 to 200 (FarmHash has a code path per length
// range), UTF-8, bytes that are not UTF-8.
func farmhashStrings() [][]byte {
	out := [][]byte{nil, []byte("a"), []byte("Hello"), []byte("TensorFlow"), []byte("2.x"),
		[]byte("héllo wörld"), []byte("日本語のテキスト"), []byte("🙂🙃"), {0, 0xff, 0x80, '\n', 0}}
	var b []byte
	for n := 1; n <= 200; n++ {
		b = append(b, byte('a'+(n*7)%26))
		out = append(out, bytes.Clone(b))
	}
	long := []byte(strings.Repeat("crème brûlée ", 100))
	return append(out, long)
}

const farmhashProgram = `#include <farmhash.h>
#include <iostream>
#include <string>
static int unhex(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }
int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::string s;
    for (size_t i = 0; i + 1 < line.size(); i += 2) s.push_back(char(unhex(line[i]) * 16 + unhex(line[i + 1])));
    std::cout << util::Fingerprint64(s.data(), s.size()) << "\n";
  }
}
`

// TestFingerprint64MatchesGoogleFarmhash checks Fingerprint64 against
// Google's C++ FarmHash (Debian's libfarmhash-dev), compiled here: the
// library TensorFlow's Fingerprint64 is. Without g++ or the library the
// test skips, and fails under CI=true, which installs them.
func TestFingerprint64MatchesGoogleFarmhash(t *testing.T) {
	skip := func(msg string) {
		t.Helper()
		msg += "; install g++ and libfarmhash-dev (apt-get install)"
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: " + msg)
		}
		t.Skip(msg)
	}
	gxx, err := exec.LookPath("g++")
	if err != nil {
		skip("no g++")
	}
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "fp.cc"), filepath.Join(dir, "fp")
	if err := os.WriteFile(src, []byte(farmhashProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(gxx, "-O1", "-o", bin, src, "-lfarmhash").CombinedOutput(); err != nil {
		skip(fmt.Sprintf("cannot build against libfarmhash: %v: %s", err, out))
	}
	strs := farmhashStrings()
	var in bytes.Buffer
	for _, s := range strs {
		in.WriteString(hex.EncodeToString(s) + "\n")
	}
	cmd := exec.Command(bin)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("farmhash program: %v", err)
	}
	var want, got []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		want = append(want, sc.Text())
	}
	for _, s := range strs {
		got = append(got, strconv.FormatUint(Fingerprint64(s), 10))
	}
	if len(want) != len(strs) {
		t.Fatalf("farmhash program printed %d hashes for %d strings", len(want), len(strs))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Fingerprint64 (-libfarmhash +go-farm):\n%s", diff)
	}
}
