package checkpoint

import "testing"

// BenchmarkSaveBigTable saves the big table (1M × 64 float32, 256 MiB) and
// the global step, keeping one checkpoint: the writer's cost, to profile
// with -cpuprofile.
//
//	go test -run - -bench SaveBigTable -benchtime 5x -cpuprofile cpu.out ./estimator/checkpoint/
func BenchmarkSaveBigTable(b *testing.B) {
	store := bigStore(b, bigRows(), 3)
	dir := b.TempDir()
	b.SetBytes(int64(bigRows() * bigDim * 4))
	b.ResetTimer()
	for i := range b.N {
		if _, err := Save(dir, store, int64(i), 1); err != nil {
			b.Fatal(err)
		}
	}
}
