// Package census is the census income (Adult) wide & deep example's data
// and feature columns, as TensorFlow's tutorial (tensorflow/models,
// official/r1/wide_deep, census_dataset.py) has them: the UCI files
// adult.data and adult.test read in their own format, cleaned as the
// tutorial cleans them, and synthetic rows in that same format.
package census

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/towerflow/towerflow/dataset"
)

// Label is the label column; Positive is its positive class.
const (
	Label    = "income_bracket"
	Positive = ">50K"
)

// Schema is the columns of adult.data and adult.test, in order, as the
// tutorial's _CSV_COLUMNS and _CSV_COLUMN_DEFAULTS: numbers are integers,
// the rest strings.
var Schema = dataset.Schema{
	{Name: "age", Kind: dataset.KindInt64},
	{Name: "workclass", Kind: dataset.KindBytes, Optional: true},
	{Name: "fnlwgt", Kind: dataset.KindInt64},
	{Name: "education", Kind: dataset.KindBytes, Optional: true},
	{Name: "education_num", Kind: dataset.KindInt64},
	{Name: "marital_status", Kind: dataset.KindBytes, Optional: true},
	{Name: "occupation", Kind: dataset.KindBytes, Optional: true},
	{Name: "relationship", Kind: dataset.KindBytes, Optional: true},
	{Name: "race", Kind: dataset.KindBytes, Optional: true},
	{Name: "gender", Kind: dataset.KindBytes, Optional: true},
	{Name: "capital_gain", Kind: dataset.KindInt64},
	{Name: "capital_loss", Kind: dataset.KindInt64},
	{Name: "hours_per_week", Kind: dataset.KindInt64},
	{Name: "native_country", Kind: dataset.KindBytes, Optional: true},
	{Name: Label, Kind: dataset.KindBytes},
}

// Clean copies a file in adult.data's or adult.test's format to w as
// plain CSV, as the tutorial's download script does: fields separated by
// ", " become comma-separated (every field's surrounding spaces go),
// blank lines and lines without a comma (adult.test's first line, "|1x3
// Cross validator") are dropped, and a trailing "." (adult.test's labels,
// ">50K.") is removed. A line whose
// number of fields is not the schema's is an error naming the line.
func Clean(name string, r io.Reader, w io.Writer) (rows int, err error) {
	sc := bufio.NewScanner(r)
	bw := bufio.NewWriter(w)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || !strings.Contains(s, ",") {
			continue
		}
		s = strings.TrimSuffix(s, ".")
		fields := strings.Split(s, ",")
		if len(fields) != len(Schema) {
			return rows, fmt.Errorf("%s:%d: %d fields, want %d (%s)", name, line, len(fields), len(Schema), strings.Join(names(), ", "))
		}
		for i, f := range fields {
			fields[i] = strings.TrimSpace(f)
		}
		bw.WriteString(strings.Join(fields, ","))
		bw.WriteByte('\n')
		rows++
	}
	if err := sc.Err(); err != nil {
		return rows, fmt.Errorf("%s: %w", name, err)
	}
	if err := bw.Flush(); err != nil {
		return rows, err
	}
	return rows, nil
}

func names() []string {
	n := make([]string, len(Schema))
	for i, c := range Schema {
		n[i] = c.Name
	}
	return n
}

// CleanFile cleans the file src (see Clean) into the file dst, and says
// how many rows it wrote.
func CleanFile(src, dst string) (int, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	n, err := Clean(src, in, out)
	if cerr := out.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("%s: %w", dst, cerr)
	}
	return n, err
}

// Reader reads a cleaned file (see CleanFile) as Examples of Schema's
// columns.
func Reader(cleaned ...string) (*dataset.CSVReader, error) {
	return dataset.NewCSVReader(cleaned, dataset.CSVOptions{Schema: Schema, NoHeader: true})
}

// Prepare cleans dir's adult.data and adult.test into out (adult.data.csv
// and adult.test.csv) and returns their paths.
func Prepare(dir, out string) (train, test string, err error) {
	train, test = filepath.Join(out, "adult.data.csv"), filepath.Join(out, "adult.test.csv")
	for _, p := range [][2]string{{filepath.Join(dir, "adult.data"), train}, {filepath.Join(dir, "adult.test"), test}} {
		n, err := CleanFile(p[0], p[1])
		if err != nil {
			return "", "", err
		}
		if n == 0 {
			return "", "", fmt.Errorf("%s: no rows", p[0])
		}
	}
	return train, test, nil
}

// The tutorial's vocabularies (its categorical_column_with_vocabulary_list
// keys), and the values the synthetic rows draw from.
var (
	Education = []string{"Bachelors", "HS-grad", "11th", "Masters", "9th", "Some-college",
		"Assoc-acdm", "Assoc-voc", "7th-8th", "Doctorate", "Prof-school", "5th-6th", "10th",
		"1st-4th", "Preschool", "12th"}
	MaritalStatus = []string{"Married-civ-spouse", "Divorced", "Married-spouse-absent",
		"Never-married", "Separated", "Married-AF-spouse", "Widowed"}
	Relationship = []string{"Husband", "Not-in-family", "Wife", "Own-child", "Unmarried",
		"Other-relative"}
	Workclass = []string{"Self-emp-not-inc", "Private", "State-gov", "Federal-gov",
		"Local-gov", "?", "Self-emp-inc", "Without-pay", "Never-worked"}
	// AgeBoundaries are the tutorial's age buckets' boundaries.
	AgeBoundaries = []float64{18, 25, 30, 35, 40, 45, 50, 55, 60, 65}

	occupations = []string{"Tech-support", "Craft-repair", "Other-service", "Sales",
		"Exec-managerial", "Prof-specialty", "Handlers-cleaners", "Machine-op-inspct",
		"Adm-clerical", "Farming-fishing", "Transport-moving", "Priv-house-serv",
		"Protective-serv", "Armed-Forces", "?"}
	races     = []string{"White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"}
	countries = []string{"United-States", "Mexico", "Philippines", "Germany", "Canada",
		"India", "England", "Cuba", "China", "?"}
	// educationNum is the years of education each of Education means
	// (adult's education_num).
	educationNum = map[string]int{"Preschool": 1, "1st-4th": 2, "5th-6th": 3, "7th-8th": 4,
		"9th": 5, "10th": 6, "11th": 7, "12th": 8, "HS-grad": 9, "Some-college": 10,
		"Assoc-voc": 11, "Assoc-acdm": 12, "Bachelors": 13, "Masters": 14,
		"Prof-school": 15, "Doctorate": 16}
	// occupationEffect is the synthetic rows' log-odds for each occupation.
	occupationEffect = map[string]float64{"Exec-managerial": 1, "Prof-specialty": 0.9,
		"Tech-support": 0.4, "Sales": 0.3, "Protective-serv": 0.3, "Craft-repair": 0,
		"Adm-clerical": -0.3, "Transport-moving": -0.2, "Machine-op-inspct": -0.5,
		"Farming-fishing": -0.8, "Handlers-cleaners": -1, "Other-service": -1.2,
		"Priv-house-serv": -2, "Armed-Forces": 0, "?": -1}
)

// Synthetic writes n rows in adult.data's format (test false) or
// adult.test's (test true: the "|1x3 Cross validator" first line and
// labels ending in "."), from a seeded generator. The label follows a
// logistic model of education, age, marriage, occupation, hours, capital
// gains and an education × occupation interaction, so a model can learn
// it; about a quarter of the rows are ">50K", as in the real data.
func Synthetic(w io.Writer, n int, seed uint64, test bool) error {
	r := rand.New(rand.NewPCG(seed, 0xce115))
	var b bytes.Buffer
	if test {
		b.WriteString("|1x3 Cross validator\n")
	}
	pick := func(v []string) string { return v[r.IntN(len(v))] }
	for i := 0; i < n; i++ {
		age := 17 + int(math.Abs(r.NormFloat64())*18)
		if age > 90 {
			age = 90
		}
		edu := pick(Education)
		en := educationNum[edu]
		marital := pick(MaritalStatus)
		occ := pick(occupations)
		gender := "Male"
		if r.IntN(3) == 0 {
			gender = "Female"
		}
		rel := pick(Relationship)
		if marital == "Married-civ-spouse" {
			rel = "Husband"
			if gender == "Female" {
				rel = "Wife"
			}
		}
		hours := 20 + r.IntN(50)
		gain, loss := 0, 0
		if r.IntN(12) == 0 {
			gain = 1000 + r.IntN(20000)
		} else if r.IntN(20) == 0 {
			loss = 1000 + r.IntN(2000)
		}
		z := -8.6 + 0.3*float64(en) + 0.04*float64(hours) + occupationEffect[occ]
		z += 2.2 * bucketEffect(age)
		if marital == "Married-civ-spouse" || marital == "Married-AF-spouse" {
			z += 2.5
		}
		if gain > 5000 {
			z += 3
		}
		if en >= 13 && (occ == "Exec-managerial" || occ == "Prof-specialty") {
			z += 1 // the interaction the crossed columns can learn
		}
		label := "<=50K"
		if r.Float64() < 1/(1+math.Exp(-z)) {
			label = ">50K"
		}
		if test {
			label += "."
		}
		fields := []string{strconv.Itoa(age), pick(Workclass), strconv.Itoa(20000 + r.IntN(400000)),
			edu, strconv.Itoa(en), marital, occ, rel, pick(races), gender,
			strconv.Itoa(gain), strconv.Itoa(loss), strconv.Itoa(hours), pick(countries), label}
		b.WriteString(strings.Join(fields, ", "))
		b.WriteByte('\n')
	}
	_, err := w.Write(b.Bytes())
	return err
}

// bucketEffect is the synthetic log-odds' age term, in [0,1]: earnings
// rise to the late forties and fall after sixty.
func bucketEffect(age int) float64 {
	switch {
	case age < 25:
		return 0
	case age < 35:
		return 0.5
	case age < 60:
		return 1
	default:
		return 0.6
	}
}

// WriteSynthetic writes synthetic adult.data (n rows) and adult.test
// (n/2 rows) into dir.
func WriteSynthetic(dir string, n int, seed uint64) error {
	for _, f := range []struct {
		name string
		n    int
		test bool
		seed uint64
	}{{"adult.data", n, false, seed}, {"adult.test", n / 2, true, seed + 1}} {
		var b bytes.Buffer
		if err := Synthetic(&b, f.n, f.seed, f.test); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}
