// Command cu builds gorgonia.org/cu and asks it for the devices.
package main

import (
	"fmt"

	"gorgonia.org/cu"
)

func main() {
	n, err := cu.NumDevices()
	fmt.Println("cu.NumDevices", n, err)
	if n > 0 {
		d := cu.Device(0)
		name, err := d.Name()
		fmt.Println("device 0", name, err)
	}
}
