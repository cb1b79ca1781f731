//go:build unix

package dataset

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The speed of the CSV reader, reported, never asserted:
//
//	go test -run '^$' -bench CSVReader ./dataset/
//
// and against pandas.read_csv (python3-pandas) on the same ~100 MB file,
// on one core, wall and CPU time:
//
//	taskset -c 0 go test -count=1 -run '^TestCSVSpeedAgainstPandas$' -v ./dataset/ -csv.speed
var (
	csvSpeed   = flag.Bool("csv.speed", false, "TestCSVSpeedAgainstPandas: time the CSV reader and pandas.read_csv on a generated file")
	csvSpeedMB = flag.Int("csv.mb", 100, "TestCSVSpeedAgainstPandas: the generated file's size in MB")
)

// speedSchema is ten numeric columns (five integers, five floats) and
// three strings.
var speedSchema = func() Schema {
	var s Schema
	for i := range 5 {
		s = append(s, Column{Name: fmt.Sprintf("i%d", i), Kind: KindInt64})
	}
	for i := range 5 {
		s = append(s, Column{Name: fmt.Sprintf("f%d", i), Kind: KindFloat})
	}
	for i := range 3 {
		s = append(s, Column{Name: fmt.Sprintf("s%d", i), Kind: KindBytes})
	}
	return s
}()

// writeSpeedCSV writes rows of speedSchema to name until it holds at
// least mb MB, and returns the rows written. One string in 16 is quoted
// and holds a comma.
func writeSpeedCSV(tb testing.TB, name string, mb int) int {
	tb.Helper()
	f, err := os.Create(name)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i, c := range speedSchema {
		if i > 0 {
			w.WriteByte(',')
		}
		w.WriteString(c.Name)
	}
	w.WriteByte('\n')
	rng := rand.New(rand.NewPCG(1, 2))
	const letters = "abcdefghijklmnopqrstuvwxyz"
	var line []byte
	rows := 0
	for size := int64(0); size < int64(mb)<<20; rows++ {
		line = line[:0]
		for range 5 {
			line = strconv.AppendInt(line, rng.Int64N(2_000_000)-1_000_000, 10)
			line = append(line, ',')
		}
		for range 5 {
			line = strconv.AppendFloat(line, rng.NormFloat64()*100, 'f', 4, 32)
			line = append(line, ',')
		}
		for j := range 3 {
			quoted := rng.IntN(16) == 0
			if quoted {
				line = append(line, `"x, `...)
			}
			for range 4 + rng.IntN(9) {
				line = append(line, letters[rng.IntN(len(letters))])
			}
			if quoted {
				line = append(line, '"')
			}
			if j < 2 {
				line = append(line, ',')
			}
		}
		line = append(line, '\n')
		w.Write(line)
		size += int64(len(line))
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return rows
}

// readAllCSV reads every row of name and returns their number.
func readAllCSV(tb testing.TB, name string, opts CSVOptions) int {
	opts.Schema = speedSchema
	r, err := NewCSVReader([]string{name}, opts)
	if err != nil {
		tb.Fatal(err)
	}
	defer r.Close()
	n := 0
	for {
		_, err := r.Next()
		if err == io.EOF {
			return n
		}
		if err != nil {
			tb.Fatal(err)
		}
		n++
	}
}

func BenchmarkCSVReader(b *testing.B) {
	name := filepath.Join(b.TempDir(), "speed.csv")
	rows := writeSpeedCSV(b, name, 8)
	fi, err := os.Stat(name)
	if err != nil {
		b.Fatal(err)
	}
	for _, reuse := range []bool{false, true} {
		b.Run(fmt.Sprintf("reuse=%v", reuse), func(b *testing.B) {
			b.SetBytes(fi.Size())
			b.ReportAllocs()
			for b.Loop() {
				if n := readAllCSV(b, name, CSVOptions{ReuseExample: reuse}); n != rows {
					b.Fatalf("%d rows read, %d written", n, rows)
				}
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// pandasScript reads argv[1] with pandas.read_csv, the columns' types
// given (as the Go reader has them), and prints the rows, the seconds
// and the CPU seconds it took.
const pandasScript = `
import sys, time
import numpy as np, pandas as pd
dtype = {}
for i in range(5): dtype["i%d" % i] = np.int64
for i in range(5): dtype["f%d" % i] = np.float32
for i in range(3): dtype["s%d" % i] = object
t, c = time.perf_counter(), time.process_time()
df = pd.read_csv(sys.argv[1], dtype=dtype, engine="c")
print(len(df), time.perf_counter() - t, time.process_time() - c)
`

// TestCSVSpeedAgainstPandas reads the file with each reader in turn,
// runs times, and reports each one's best wall time and best CPU time:
// on a shared machine the CPU time is the steadier figure.
func TestCSVSpeedAgainstPandas(t *testing.T) {
	if !*csvSpeed {
		t.Skip("a measurement: run with -csv.speed (see csv_bench_test.go)")
	}
	name := filepath.Join(t.TempDir(), "speed.csv")
	rows := writeSpeedCSV(t, name, *csvSpeedMB)
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	mb := float64(fi.Size()) / (1 << 20)
	python := os.Getenv("TOWERFLOW_PYTHON")
	if python == "" {
		python = "python3"
	}
	readers := []struct {
		name string
		read func() (n int, wall, cpu float64)
	}{}
	for _, reuse := range []bool{false, true} {
		readers = append(readers, struct {
			name string
			read func() (int, float64, float64)
		}{fmt.Sprintf("dataset.CSVReader reuse=%v", reuse), func() (int, float64, float64) {
			runtime.GC()
			start, cpu := time.Now(), cpuSeconds()
			n := readAllCSV(t, name, CSVOptions{ReuseExample: reuse})
			return n, time.Since(start).Seconds(), cpuSeconds() - cpu
		}})
	}
	readers = append(readers, struct {
		name string
		read func() (int, float64, float64)
	}{"pandas.read_csv", func() (int, float64, float64) {
		out, err := exec.Command(python, "-c", pandasScript, name).CombinedOutput()
		if err != nil {
			t.Fatalf("pandas: %v\n%s", err, out)
		}
		var n int
		var wall, cpu float64
		if _, err := fmt.Sscan(strings.TrimSpace(string(out)), &n, &wall, &cpu); err != nil {
			t.Fatalf("pandas printed %q: %v", out, err)
		}
		return n, wall, cpu
	}})
	const runs = 5
	wall := make([]float64, len(readers))
	cpu := make([]float64, len(readers))
	for range runs {
		for i, r := range readers {
			n, w, c := r.read()
			if n != rows {
				t.Fatalf("%s read %d rows, %d written", r.name, n, rows)
			}
			if wall[i] == 0 || w < wall[i] {
				wall[i] = w
			}
			if cpu[i] == 0 || c < cpu[i] {
				cpu[i] = c
			}
		}
	}
	t.Logf("%s: %.1f MB, %d rows of %d columns; best of %d runs, each reader in turn", name, mb, rows, len(speedSchema), runs)
	t.Logf("%-28s %8s %11s %7s %8s %11s %7s", "", "wall s", "rows/s", "MB/s", "CPU s", "rows/s", "MB/s")
	for i, r := range readers {
		t.Logf("%-28s %8.3f %11.0f %7.1f %8.3f %11.0f %7.1f", r.name,
			wall[i], float64(rows)/wall[i], mb/wall[i], cpu[i], float64(rows)/cpu[i], mb/cpu[i])
	}
}
