package columns

import (
	"math"
	"strconv"

	farm "github.com/dgryski/go-farm"
)

// Fingerprint64 is FarmHash's Fingerprint64 of b, the hash of
// TensorFlow's string_to_hash_bucket_fast and sparse_cross_hashed.
func Fingerprint64(b []byte) uint64 { return farm.Fingerprint64(b) }

// HashBucketID is TensorFlow's string_to_hash_bucket_fast of one value:
// Fingerprint64(value) mod buckets.
func HashBucketID(value []byte, buckets int) int64 {
	return int64(Fingerprint64(value) % uint64(buckets))
}

// intString is an integer's decimal string, as TensorFlow's as_string
// hashes an integer feature.
func intString(buf []byte, v int64) []byte { return strconv.AppendInt(buf[:0], v, 10) }

// FingerprintCat64 combines two fingerprints into one, TensorFlow's
// FingerprintCat64 (tensorflow/core/lib/hash/hash.h): the combiner of
// sparse_cross_hashed.
func FingerprintCat64(fp1, fp2 uint64) uint64 {
	const mul = 0xc6a4a7935bd1e995
	r := fp1 ^ mul
	r ^= shiftMix(fp2*mul) * mul
	r *= mul
	r = shiftMix(r) * mul
	return shiftMix(r)
}

func shiftMix(v uint64) uint64 { return v ^ (v >> 47) }

// crossHash is TensorFlow's hashed cross of one combination of values
// (HashCrosser): FingerprintCat64 of hashKey with each value's hash in
// turn, modulo buckets (modulo the largest int64 when buckets is 0, as
// sparse_cross_hashed with num_buckets 0).
func crossHash(hashKey uint64, hashes []uint64, buckets int) int64 {
	h := hashKey
	for _, x := range hashes {
		h = FingerprintCat64(h, x)
	}
	if buckets > 0 {
		return int64(h % uint64(buckets))
	}
	return int64(h % math.MaxInt64)
}
