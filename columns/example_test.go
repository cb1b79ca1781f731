package columns_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/towerflow/towerflow/columns"
	"github.com/towerflow/towerflow/dataset"
)

// records is a dataset.Source of a slice (a CSVReader or a TFRecord
// reader in a program).
type records []dataset.Example

func (r *records) Next() (dataset.Example, error) {
	if len(*r) == 0 {
		return nil, io.EOF
	}
	ex := (*r)[0]
	*r = (*r)[1:]
	return ex, nil
}

func row(age float32, city, job string, income string) dataset.Example {
	return dataset.Example{
		"age":    {Floats: []float32{age}},
		"city":   {Bytes: [][]byte{[]byte(city)}},
		"job":    {Bytes: [][]byte{[]byte(job)}},
		"income": {Bytes: [][]byte{[]byte(income)}},
	}
}

// The columns of a wide & deep model, fitted to the training data, then
// parsing a batch: the dense and sparse features the model reads through
// InputLayer and LinearLogits.
func ExampleFit() {
	age := columns.Numeric("age", columns.Standardize(), columns.Default(40))
	city := columns.VocabularyFromData("city", columns.OOVBuckets(1))
	ageBuckets := columns.BucketizedQuantiles(age, 2)
	cfg := columns.Config{
		Columns: []columns.Column{
			age, ageBuckets, columns.Indicator(city), columns.Embedding(columns.HashBucket("job", 100), 8),
			columns.Crossed([]columns.Crossable{ageBuckets, columns.RawKey("job")}, 1000),
		},
		Label: &columns.Label{Key: "income", Vocabulary: []string{"<=50K", ">50K"}},
	}
	train := records{
		row(25, "Oslo", "nurse", "<=50K"), row(38, "Lima", "chef", ">50K"),
		row(52, "Oslo", "pilot", ">50K"), row(45, "Oslo", "chef", "<=50K"),
	}
	tr, err := columns.Fit(context.Background(), &train, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	c, _ := tr.Column("city_indicator")
	fmt.Println("city vocabulary:", c.(*columns.IndicatorColumn).Categorical().(*columns.VocabularyColumn).Vocabulary())
	b, err := tr.Parse([]dataset.Example{row(30, "Rome", "chef", ">50K")})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, k := range slices.Sorted(maps.Keys(b.Features)) {
		fmt.Printf("dense %s %v\n", k, []int(b.Features[k].Shape()))
	}
	for _, k := range slices.Sorted(maps.Keys(b.Sparse)) {
		fmt.Printf("sparse %s %v\n", k, b.Sparse[k].DenseShape)
	}
	fmt.Println("label", b.Labels["income"].Data())
	fmt.Println("Rome, unknown, is the OOV bucket:", b.Features["city_indicator"].Data())
	// Output:
	// city vocabulary: [Oslo Lima]
	// dense age [1 1]
	// dense age_bucketized_indicator [1 2]
	// dense city_indicator [1 3]
	// sparse age_bucketized [1 1]
	// sparse age_bucketized_X_job [1 1]
	// sparse job [1 1]
	// label [1]
	// Rome, unknown, is the OOV bucket: [0 0 1]
}
