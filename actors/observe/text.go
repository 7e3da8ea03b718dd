package observe

import "fmt"

func typeName(v any) string { return fmt.Sprintf("%T", v) }

// panicText renders a panic value. Errors and strings from Lisa's own code
// carry codes, not bodies; anything else is reduced to its type.
func panicText(r any) string {
	switch v := r.(type) {
	case error:
		return v.Error()
	case string:
		return v
	default:
		return fmt.Sprintf("%T", r)
	}
}
