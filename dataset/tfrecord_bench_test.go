package dataset

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// benchMB is the size of the benchmark's file in MB: 100, or
// $TOWERFLOW_BENCH_MB.
func benchMB() int64 {
	if n, err := strconv.Atoi(os.Getenv("TOWERFLOW_BENCH_MB")); err == nil && n > 0 {
		return int64(n)
	}
	return 100
}

// benchExample is a tabular record of a few dozen features: dense floats
// and integers, a word and a variable-length list of ids.
func benchExample(rng *rand.Rand) Example {
	ex := Example{}
	for i := range 16 {
		ex[fmt.Sprintf("float_%02d", i)] = Feature{Floats: []float32{rng.Float32()}}
	}
	for i := range 8 {
		ex[fmt.Sprintf("int_%02d", i)] = Feature{Int64s: []int64{rng.Int64N(1 << 20)}}
	}
	ex["word"] = Feature{Bytes: [][]byte{[]byte(fmt.Sprintf("word%d", rng.IntN(10000)))}}
	ids := make([]int64, rng.IntN(10))
	for i := range ids {
		ids[i] = rng.Int64N(100000)
	}
	ex["ids"] = Feature{Int64s: ids}
	ex["label"] = Feature{Floats: []float32{float32(rng.IntN(2))}}
	return ex
}

// BenchmarkReadExamples reads and decodes a generated TFRecord file of
// about 100 MB (or $TOWERFLOW_BENCH_MB) of tf.Examples (plain and gzipped) on the cores
// GOMAXPROCS gives (one with -cpu 1), reporting records/s and MB/s of
// the uncompressed records:
//
//	go test -run '^$' -bench '^BenchmarkReadExamples$' -benchtime 3x -cpu 1 ./dataset
func BenchmarkReadExamples(b *testing.B) {
	for _, c := range []Compression{NoCompression, GZIP} {
		name := "plain"
		if c == GZIP {
			name = "gzip"
		}
		b.Run(name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "bench.tfrecord")
			w, err := CreateRecords(path, c)
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var size int64
			records := 0
			for size < benchMB()<<20 {
				ex := benchExample(rng)
				data, err := AppendExample(nil, ex)
				if err != nil {
					b.Fatal(err)
				}
				if err := w.Write(data); err != nil {
					b.Fatal(err)
				}
				size += int64(len(data)) + 16
				records++
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			cpu0 := cpuSeconds()
			b.ResetTimer()
			for range b.N {
				r, err := OpenRecords(path, &RecordOptions{Compression: c})
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for {
					_, err := r.NextExample()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					n++
				}
				r.Close()
				if n != records {
					b.Fatalf("read %d records, want %d", n, records)
				}
			}
			b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
			// On a shared machine the process may get less than its core:
			// the CPU time it did get gives the rate a core of its own would.
			if cpu := cpuSeconds() - cpu0; cpu > 0 {
				b.ReportMetric(float64(size)*float64(b.N)/1e6/cpu, "MB/cpu-s")
				b.ReportMetric(float64(records)*float64(b.N)/cpu, "records/cpu-s")
			}
			os.Remove(path)
		})
	}
}
