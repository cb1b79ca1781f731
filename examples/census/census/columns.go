package census

import (
	"github.com/towerflow/towerflow/canned"
	"github.com/towerflow/towerflow/columns"
)

// HiddenUnits are the tutorial's DNN layers.
var HiddenUnits = []int{100, 75, 50, 25}

// Columns returns the tutorial's feature columns (build_model_columns):
// the wide part's base columns (education, marital_status, relationship
// and workclass from their vocabularies, occupation hashed into 1000
// buckets, age cut at AgeBoundaries) and crosses (education × occupation,
// age_buckets × education × occupation, 1000 hash buckets each); the deep
// part's numbers (age, education_num, capital_gain, capital_loss,
// hours_per_week), the four vocabulary columns one-hot, and occupation
// embedded in 8. None needs fitting.
func Columns() (wide, deep []columns.Column) {
	age := columns.Numeric("age")
	educationNum := columns.Numeric("education_num")
	capitalGain := columns.Numeric("capital_gain")
	capitalLoss := columns.Numeric("capital_loss")
	hours := columns.Numeric("hours_per_week")

	education := columns.VocabularyList("education", Education)
	marital := columns.VocabularyList("marital_status", MaritalStatus)
	relationship := columns.VocabularyList("relationship", Relationship)
	workclass := columns.VocabularyList("workclass", Workclass)
	occupation := columns.HashBucket("occupation", 1000)
	ageBuckets := columns.Bucketized(age, AgeBoundaries)

	wide = []columns.Column{
		education, marital, relationship, workclass, occupation, ageBuckets,
		columns.Crossed([]columns.Crossable{columns.RawKey("education"), columns.RawKey("occupation")}, 1000),
		columns.Crossed([]columns.Crossable{ageBuckets, columns.RawKey("education"), columns.RawKey("occupation")}, 1000),
	}
	deep = []columns.Column{
		age, educationNum, capitalGain, capitalLoss, hours,
		columns.Indicator(workclass), columns.Indicator(education),
		columns.Indicator(marital), columns.Indicator(relationship),
		columns.Embedding(occupation, 8),
	}
	return wide, deep
}

// Config is the Transformer's configuration of the wide and deep columns
// and the head's label (canned.TransformerConfig): class ids of "<=50K"
// and ">50K".
func Config() columns.Config {
	wide, deep := Columns()
	return canned.TransformerConfig(Head(), append(wide, deep...)...)
}

// LabelVocabulary are the label's classes, the positive last.
var LabelVocabulary = []string{"<=50K", Positive}

// Head is the tutorial's head: binary, the label's vocabulary
// LabelVocabulary.
func Head() canned.BinaryHead {
	return canned.BinaryHead{LabelKey: Label, LabelVocabulary: LabelVocabulary}
}
