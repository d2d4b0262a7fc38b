package client

import "errors"

// Until package subject is merged: the same rules, minimal.
func validateSubject(s []byte) error {
	return validateTokens(s, false)
}

func validatePattern(s []byte) error {
	return validateTokens(s, true)
}

func validateTokens(s []byte, wildcards bool) error {
	if len(s) == 0 || len(s) > 255 {
		return errors.New("subject: bad length")
	}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			if s[i] <= ' ' || s[i] == 0x7f {
				return errors.New("subject: bad character")
			}
			continue
		}
		token := s[start:i]
		switch {
		case len(token) == 0:
			return errors.New("subject: empty token")
		case len(token) == 1 && (token[0] == '*' || token[0] == '>'):
			if !wildcards || (token[0] == '>' && i != len(s)) {
				return errors.New("subject: wildcard")
			}
		}
		start = i + 1
	}
	return nil
}
