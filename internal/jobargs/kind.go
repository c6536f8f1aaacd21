// Package jobargs reads the kind a job type names (the one method of producer.JobArgs
// and consumer.JobArgs, which declare the same interface so that neither package
// imports the other) from the type alone, before any value of it exists.
package jobargs

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/workq/workq/internal/queue"
)

// ErrNoKind means a type's kind cannot be read from the type: it is an interface
// type (no value to call Kind on), its Kind method panicked on a zero value, or the
// kind is longer than a job's kind may be.
var ErrNoKind = errors.New("cannot read the job kind from the type")

// KindOf returns the kind T names: Kind() of T's zero value or, when T is a pointer
// type, of a pointer to a new zero value, so that a Kind method that reads its
// receiver finds one. Kind must return a constant; a Kind that depends on the value
// routes by the zero value's answer.
func KindOf[T interface{ Kind() string }]() (kind string, err error) {
	t := reflect.TypeFor[T]()
	var v T
	switch t.Kind() {
	case reflect.Interface:
		return "", fmt.Errorf("%w: %s is an interface type; use the concrete job type", ErrNoKind, t)
	case reflect.Pointer:
		v = reflect.New(t.Elem()).Interface().(T)
	}
	defer func() {
		if r := recover(); r != nil {
			kind, err = "", fmt.Errorf("%w: %s.Kind panicked on a zero value: %v", ErrNoKind, t, r)
		}
	}()
	kind = v.Kind()
	if len(kind) > queue.MaxKindLen {
		return "", fmt.Errorf("%w: %s's kind has %d bytes, more than %d", ErrNoKind, t, len(kind), queue.MaxKindLen)
	}
	return kind, nil
}
