// Package golden compares test output with files under testdata. Set
// LISA_UPDATE_GOLDEN=1 to rewrite the files instead, then review the diff
// before committing it.
package golden
