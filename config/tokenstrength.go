package config

import "math"

// MinStatusTokenBits is the least randomness, by [TokenStrengthBits], that
// runtime.status_token must have.
const MinStatusTokenBits = 128

// TokenStrengthBits estimates the randomness of a token in bits, as if
// its characters had been drawn at random from the alphabet they come
// from: the characters counted times log2 of the alphabet's size. The
// alphabet is the union of the classes the token uses — digits (10),
// lower-case letters (26), upper-case letters (26), everything else (33,
// the ASCII punctuation) — except that a token of hexadecimal digits in
// one case, with at least one letter and one digit, counts as 16. Patterns count for
// little: a token that repeats a shorter unit counts only that unit, and
// within it a character that continues a run of equal or consecutive
// characters ("aaa", "abc", "321") beyond its first two counts nothing.
// So "a" is 4.7 bits, "1234" 6.6, a 64-character hex string 256 and the
// 43 characters of 32 random bytes in unpadded base64 about 256. Words
// are not recognised: the estimate is meant for generated tokens, and a
// phrase of words scores higher than its real randomness.
func TokenStrengthBits(s string) float64 {
	rs := []rune(s)
	if len(rs) == 0 {
		return 0
	}
	// The shortest unit whose repetition makes the token.
	unit := len(rs)
	for p := 1; p < len(rs); p++ {
		ok := true
		for i := p; i < len(rs); i++ {
			if rs[i] != rs[i-p] {
				ok = false
				break
			}
		}
		if ok {
			unit = p
			break
		}
	}
	rs = rs[:unit]
	counted := 0
	for i := range rs {
		if i >= 2 {
			d1, d2 := rs[i]-rs[i-1], rs[i-1]-rs[i-2]
			if d1 == d2 && d1 >= -1 && d1 <= 1 {
				continue
			}
		}
		counted++
	}
	var digit, lower, upper, other, hexLower, hexUpper bool
	hexLower, hexUpper = true, true
	for _, r := range []rune(s) {
		switch {
		case '0' <= r && r <= '9':
			digit = true
		case 'a' <= r && r <= 'z':
			lower = true
			hexUpper = false
			if r > 'f' {
				hexLower = false
			}
		case 'A' <= r && r <= 'Z':
			upper = true
			hexLower = false
			if r > 'F' {
				hexUpper = false
			}
		default:
			other = true
			hexLower, hexUpper = false, false
		}
	}
	alphabet := 0
	switch {
	case digit && ((hexLower && lower) || (hexUpper && upper)):
		alphabet = 16
	default:
		for _, c := range []struct {
			used bool
			size int
		}{{digit, 10}, {lower, 26}, {upper, 26}, {other, 33}} {
			if c.used {
				alphabet += c.size
			}
		}
	}
	return float64(counted) * math.Log2(float64(alphabet))
}
