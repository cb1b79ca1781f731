// Package lint holds tests of rules the whole module keeps that the
// compiler and vet do not check, such as that library code never logs
// through the process's global loggers. It has no code of its own.
package lint
