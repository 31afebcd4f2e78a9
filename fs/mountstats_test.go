package fs

import (
	"reflect"
	"testing"
)

// TestMountStatsWireSetsEveryField: with every field of a mount's figures
// set, every field of what Wire sends is: a field added to the wire is
// also converted.
func TestMountStatsWireSetsEveryField(t *testing.T) {
	var s MountStats
	setAll(reflect.ValueOf(&s).Elem())
	if zero := zeroFields(reflect.ValueOf(s.Wire()), "control.MountStats"); len(zero) > 0 {
		t.Errorf("Wire leaves unset: %v", zero)
	}
}

// setAll sets every exported field of v, through structs, arrays and
// slices (of one element), to a value that is not its zero.
func setAll(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				setAll(v.Field(i))
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		setAll(v.Index(0))
	case reflect.Array:
		for i := range v.Len() {
			setAll(v.Index(i))
		}
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float64:
		v.SetFloat(1.5)
	default:
		panic("setAll: teach it " + v.Kind().String())
	}
}

// zeroFields names the fields of v, through structs and slices, that hold
// their zero value.
func zeroFields(v reflect.Value, path string) []string {
	switch v.Kind() {
	case reflect.Struct:
		var out []string
		for i := range v.NumField() {
			out = append(out, zeroFields(v.Field(i), path+"."+v.Type().Field(i).Name)...)
		}
		return out
	case reflect.Slice:
		var out []string
		for i := range v.Len() {
			out = append(out, zeroFields(v.Index(i), path+"[]")...)
		}
		if v.Len() == 0 {
			out = append(out, path)
		}
		return out
	}
	if v.IsZero() {
		return []string{path}
	}
	return nil
}
