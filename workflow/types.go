package workflow

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"github.com/superstep/superstep/internal/jsonstr"
)

// registry maps stable names to Go types so that a checkpoint restored in a
// fresh process yields values of the same Go types as the ones encoded.
var registry = struct {
	sync.RWMutex
	byName map[string]reflect.Type
	byType map[reflect.Type]string
}{byName: map[string]reflect.Type{}, byType: map[reflect.Type]string{}}

func init() {
	RegisterType[string]("string")
	RegisterType[int]("int")
	RegisterType[int64]("int64")
	RegisterType[float64]("float64")
	RegisterType[bool]("bool")
	RegisterType[[]byte]("bytes")
	RegisterType[[]string]("[]string")
	RegisterType[[]int]("[]int")
	RegisterType[[]any]("[]any")
	RegisterType[map[string]any]("map[string]any")
	RegisterType[map[string]string]("map[string]string")
	RegisterType[json.RawMessage]("json.RawMessage")
	RegisterType[Answer[any]]("workflow.Answer")
}

// RegisterType names T in checkpoints, so that messages, shared-state
// values, request payloads and answers of type T can be checkpointed and
// restored in another process as T. The name is what checkpoints store:
// choose a stable one ("orders.Item", not derived from the package path),
// so that moving T to another package or renaming it keeps its stored
// runs restorable. Every type whose values reach a checkpoint must be
// registered (common built-in types are): Build reports an executor whose
// message types are not, and Send, Set, Yield and RequestInput fail on
// such values. Values are encoded with encoding/json, so T must round-trip
// through it (exported fields; nested interface values come back as JSON's
// generic types).
//
// Registering the same name and type twice is a no-op; a type may have
// several names (checkpoints use the first, and every name decodes).
// Registering a name already bound to another type is a programmer error
// and panics, like gob.Register. Call it from init.
//
// Checkpoints made before names were explicit name T by its package path
// and type name; that name decodes as T too, as long as T has not moved.
func RegisterType[T any](name string) {
	registerType(reflect.TypeFor[T](), name)
}

func registerType(t reflect.Type, name string) {
	registry.Lock()
	defer registry.Unlock()
	if old, ok := registry.byName[name]; ok && old != t {
		panic(fmt.Sprintf("workflow: type name %q registered for %v and %v", name, old, t))
	}
	registry.byName[name] = t
	if _, ok := registry.byType[t]; !ok {
		registry.byType[t] = name
	}
	if legacy := canonicalName(t); registry.byName[legacy] == nil {
		registry.byName[legacy] = t
	}
}

// canonicalName is the name types had in checkpoints before names were
// explicit: package path and name for named types, the spelling otherwise.
func canonicalName(t reflect.Type) string {
	if t.Name() != "" && t.PkgPath() != "" {
		return t.PkgPath() + "." + t.Name()
	}
	return t.String()
}

// errUnregistered describes a value of type t that cannot be checkpointed.
func errUnregistered(t reflect.Type) error {
	return fmt.Errorf("workflow: type %v has no checkpoint name (call workflow.RegisterType[%v](\"a stable name\")): %w", t, t, ErrUnregisteredType)
}

// TypeName returns the name t is registered under.
func registeredName(t reflect.Type) (string, bool) {
	registry.RLock()
	defer registry.RUnlock()
	n, ok := registry.byType[t]
	return n, ok
}

// typeByName returns the type registered under name.
func typeByName(name string) (reflect.Type, bool) {
	registry.RLock()
	defer registry.RUnlock()
	t, ok := registry.byName[name]
	return t, ok
}

// typedValue is the checkpoint form of a value: its registered type name and
// its JSON encoding. A nil value has an empty type name.
type typedValue struct {
	T string          `json:"t"`
	V json.RawMessage `json:"v,omitempty"`
}

// checkEncodable reports an error unless v's type is registered.
func checkEncodable(v any) error {
	if v == nil {
		return nil
	}
	if _, ok := registeredName(reflect.TypeOf(v)); !ok {
		return errUnregistered(reflect.TypeOf(v))
	}
	return nil
}

// encodeValue encodes v as a typedValue.
func encodeValue(v any) (typedValue, error) {
	if v == nil {
		return typedValue{}, nil
	}
	name, ok := registeredName(reflect.TypeOf(v))
	if !ok {
		return typedValue{}, errUnregistered(reflect.TypeOf(v))
	}
	if s, ok := v.(string); ok && len(s) >= minSpliced {
		// json.Marshal would grow its buffer by doubling and copy the
		// result out: for a request's 8 MiB text, about four times the
		// text allocated where this sizes one buffer exactly.
		return typedValue{T: name, V: jsonstr.Append(make([]byte, 0, jsonstr.Len(s)), s)}, nil
	}
	data, err := marshalJSON(v)
	if err != nil {
		return typedValue{}, fmt.Errorf("workflow: encode %s: %w", name, err)
	}
	return typedValue{T: name, V: data}, nil
}

// decodeValue turns a typedValue back into a value of its registered type.
func decodeValue(tv typedValue) (any, error) {
	if tv.T == "" {
		return nil, nil
	}
	t, ok := typeByName(tv.T)
	if !ok {
		return nil, fmt.Errorf("%w: unknown type name %q (not registered in this process)", ErrCheckpoint, tv.T)
	}
	p := reflect.New(t)
	if err := json.Unmarshal(tv.V, p.Interface()); err != nil {
		return nil, fmt.Errorf("%w: decode %s: %v", ErrCheckpoint, tv.T, err)
	}
	return p.Elem().Interface(), nil
}

// marshalJSON encodes v with encoding/json, which sorts map keys, so equal
// values give equal bytes.
func marshalJSON(v any) ([]byte, error) { return json.Marshal(v) }

// Answer is the message a requester receives in the superstep after
// Run.Respond answered one of its requests for input (RequestInput[T]).
// Handle it with On(func(c *Context, a Answer[T]) error): such a handler
// receives the answers of type T only, so an executor that asks several
// questions of different types has one handler per type; Answer[any]
// receives every answer (an executor that implements Executor itself
// receives Answer[any] values and lists its type among its InputTypes).
type Answer[T any] struct {
	// RequestID is the answered request's id.
	RequestID string
	// Payload is the payload the executor sent with the request.
	Payload any
	// Value is the answer.
	Value T
}

// anyAnswer is the type of the answer messages the runner queues.
var anyAnswer = reflect.TypeFor[Answer[any]]()

// answerOf returns T; On uses it to recognize an answer handler.
func (Answer[T]) answerOf() reflect.Type { return reflect.TypeFor[T]() }

// from converts a queued answer to an Answer[T], or reports false when its
// value is not a T.
func (Answer[T]) from(a Answer[any]) (any, bool) {
	if a.Value == nil {
		return Answer[T]{RequestID: a.RequestID, Payload: a.Payload}, true
	}
	v, ok := a.Value.(T)
	if !ok {
		return nil, false
	}
	return Answer[T]{RequestID: a.RequestID, Payload: a.Payload, Value: v}, true
}

// answerHandler is implemented by every Answer[T].
type answerHandler interface {
	answerOf() reflect.Type
	from(a Answer[any]) (any, bool)
}

// answerJSON is Answer's checkpoint form: its interface fields keep their types.
type answerJSON struct {
	RequestID string     `json:"request_id"`
	Payload   typedValue `json:"payload"`
	Value     typedValue `json:"value"`
}

// MarshalJSON encodes the answer with the registered types of its payload
// and value (the runner queues Answer[any], checkpointed this way).
func (a Answer[T]) MarshalJSON() ([]byte, error) {
	p, err := encodeValue(a.Payload)
	if err != nil {
		return nil, err
	}
	v, err := encodeValue(a.Value)
	if err != nil {
		return nil, err
	}
	return marshalJSON(answerJSON{RequestID: a.RequestID, Payload: p, Value: v})
}

// UnmarshalJSON decodes an answer encoded by MarshalJSON.
func (a *Answer[T]) UnmarshalJSON(data []byte) error {
	var aj answerJSON
	if err := json.Unmarshal(data, &aj); err != nil {
		return err
	}
	p, err := decodeValue(aj.Payload)
	if err != nil {
		return err
	}
	v, err := decodeValue(aj.Value)
	if err != nil {
		return err
	}
	tv, ok := v.(T)
	if !ok && v != nil {
		return fmt.Errorf("workflow: answer %q: value of type %T, want %v", aj.RequestID, v, reflect.TypeFor[T]())
	}
	*a = Answer[T]{RequestID: aj.RequestID, Payload: p, Value: tv}
	return nil
}
