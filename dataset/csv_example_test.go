package dataset_test

import (
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/towerflow/towerflow/dataset"
)

// A schema inferred from the first rows, printed to paste into code,
// then the rows read with it: the empty score takes its column's
// default, the bad id is an error naming its file, line and column.
func Example_csv() {
	dir, err := os.MkdirTemp("", "csv")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	data := "id,score,city\n1,0.5,Oslo\n2,,\"Rome, Lazio\"\nx3,7,Paris\n"
	if err := os.WriteFile(filepath.Join(dir, "data.csv"), []byte(data), 0o644); err != nil {
		log.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		log.Fatal(err)
	}
	if err := os.Chdir(dir); err != nil { // for short file names in the output
		log.Fatal(err)
	}
	defer os.Chdir(wd)

	schema, err := dataset.InferCSVSchema([]string{"*.csv"}, dataset.CSVOptions{}, 2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(schema)

	r, err := dataset.NewCSVReader([]string{"*.csv"}, dataset.CSVOptions{Schema: schema})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for {
		ex, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(ex["id"].Int64s, ex["score"].Floats, string(ex["city"].Bytes[0]))
	}
	// Output:
	// dataset.Schema{
	// 	{Name: "id", Kind: dataset.KindInt64},
	// 	{Name: "score", Kind: dataset.KindFloat, Optional: true},
	// 	{Name: "city", Kind: dataset.KindBytes},
	// }
	// [1] [0.5] Oslo
	// [2] [0] Rome, Lazio
	// data.csv:4: column "id" (1): "x3" is not an integer
}
