package main

import "github.com/ironbus/ironbus/internal/units"

// sizeValue is a pflag.Value for sizes with units.
type sizeValue struct{ bytes *int64 }

func (v sizeValue) String() string {
	// Empty for zero ("none", "the default"), so --help prints no
	// "(default 0B)" after a knob whose zero means something else.
	if v.bytes == nil || *v.bytes == 0 {
		return ""
	}
	return units.FormatSize(*v.bytes)
}

func (v sizeValue) Set(text string) error {
	n, err := units.ParseSize(text)
	if err != nil {
		return err
	}
	*v.bytes = n
	return nil
}

func (sizeValue) Type() string { return "size" }
