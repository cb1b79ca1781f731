package towers_test

import (
	"fmt"
	"log"

	"gorgonia.org/tensor"

	"github.com/towerflow/towerflow/towers"
)

func ExampleParseDevice() {
	for _, name := range []string{"/gpu:0", "/CPU:1", "/device:GPU:2", "/job:localhost/replica:0/task:0/device:CPU:3", "/tpu:0"} {
		d, err := towers.ParseDevice(name)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Printf("%-45s %v kind=%v index=%d\n", name, d, d.Kind, d.Index)
	}
	// Output:
	// /gpu:0                                        /device:GPU:0 kind=GPU index=0
	// /CPU:1                                        /device:CPU:1 kind=CPU index=1
	// /device:GPU:2                                 /device:GPU:2 kind=GPU index=2
	// /job:localhost/replica:0/task:0/device:CPU:3  /device:CPU:3 kind=CPU index=3
	// error: parse device "/tpu:0": unknown device type "tpu" (want CPU or GPU)
}

func ExampleStore_Flat() {
	s := towers.NewStore(towers.StoreConfig{})
	for _, spec := range []towers.VarSpec{
		{Name: "kernel", Dtype: tensor.Float64, Shape: tensor.Shape{2, 2}, Init: towers.Constant(1), Trainable: true},
		{Name: "steps", Dtype: tensor.Int64}, // not trainable: not a weight
		{Name: "bias", Dtype: tensor.Float32, Init: towers.Constant(0.5), Trainable: true},
	} {
		if _, _, err := s.GetOrCreate(spec); err != nil {
			log.Fatal(err)
		}
	}
	flat, err := s.Flat()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.FlatSize(), flat)

	// SetFlat takes the same layout: weights in creation order, row-major.
	if err := s.SetFlat([]float64{1, 2, 3, 4, 0.25}); err != nil {
		log.Fatal(err)
	}
	kernel, _ := s.Value("kernel")
	bias, _ := s.Value("bias")
	fmt.Println(kernel.Data(), bias.Data())
	fmt.Println(s.SetFlat([]float64{1, 2}))
	// Output:
	// 5 [1 1 1 1 0.5]
	// [1 2 3 4] 0.25
	// set flat: vector has 2 elements, the weights have 5
}
