package weightavg

// RoundSeed is roundSeed, for the tests' references.
var RoundSeed = roundSeed
