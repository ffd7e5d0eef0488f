package server_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/djinn-go/djinn/internal/server"
)

// junk fills m's fields, each left out a third of the time, with values
// chosen to break a careless handler: extremes of every integer type,
// NaN and infinities, empty, huge and odd strings, ids one byte short or
// long, 200 kB of bytes, enum numbers no enum has; messages nest three
// deep.
func junk(r *rand.Rand, m protoreflect.Message, depth int) {
	fs := m.Descriptor().Fields()
	for i := range fs.Len() {
		f := fs.Get(i)
		nested := f.Kind() == protoreflect.MessageKind || f.Kind() == protoreflect.GroupKind
		switch {
		case r.IntN(3) == 0:
		case f.IsMap():
			mp := m.Mutable(f).Map()
			for range r.IntN(3) {
				k := junkScalar(r, f.MapKey())
				if f.MapValue().Kind() != protoreflect.MessageKind {
					mp.Set(k.MapKey(), junkScalar(r, f.MapValue()))
				} else if depth < 3 {
					v := mp.NewValue()
					junk(r, v.Message(), depth+1)
					mp.Set(k.MapKey(), v)
				}
			}
		case f.IsList():
			l := m.Mutable(f).List()
			for range r.IntN(4) {
				if !nested {
					l.Append(junkScalar(r, f))
				} else if depth < 3 {
					v := l.NewElement()
					junk(r, v.Message(), depth+1)
					l.Append(v)
				}
			}
		case nested:
			if depth < 3 {
				junk(r, m.Mutable(f).Message(), depth+1)
			}
		default:
			m.Set(f, junkScalar(r, f))
		}
	}
}

// junkScalar is a value of f's kind that a handler must refuse or take
// without harm.
func junkScalar(r *rand.Rand, f protoreflect.FieldDescriptor) protoreflect.Value {
	ints := []int64{0, 1, -1, math.MaxInt64, math.MinInt64, math.MaxInt32, int64(time.Hour), r.Int64(), 16, 1 << 40}
	switch f.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(r.IntN(2) == 0)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(ints[r.IntN(len(ints))]))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(ints[r.IntN(len(ints))])
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(ints[r.IntN(len(ints))]))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(ints[r.IntN(len(ints))]))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(math.Inf(1)))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64([]float64{math.NaN(), math.Inf(-1), -1, 0, 1e300}[r.IntN(5)])
	case protoreflect.StringKind:
		ss := []string{"", "x", "a:b", "127.0.0.1:1", "djinn://127.0.0.1:1/x", strings.Repeat("z", 70000), "\x00", "..", "*", "a b", "-1"}
		return protoreflect.ValueOfString(ss[r.IntN(len(ss))])
	case protoreflect.BytesKind:
		n := []int{0, 1, 15, 16, 17, 32, 200000}[r.IntN(7)]
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return protoreflect.ValueOfBytes(b)
	case protoreflect.EnumKind:
		vs := f.Enum().Values()
		if r.IntN(4) == 0 {
			return protoreflect.ValueOfEnum(99)
		}
		return protoreflect.ValueOfEnum(vs.Get(r.IntN(vs.Len())).Number())
	}
	return f.Default()
}

// TestEveryRPCTakesJunk (DESIGN.md 8: a clear error for every bad input,
// never a panic or a hang): every unary RPC the server serves, given
// requests of junk (a fixed seed) as an operator and as a principal, answers
// — success or a refusal — and never Internal, Unknown (a panic the edge
// caught) or no answer within the call's bound. Membership changes are
// left out: junk that is valid would change the cluster under the test.
func TestEveryRPCTakesJunk(t *testing.T) {
	t.Parallel()
	e := newMatrixEnv(t)
	skip := []string{"/djinn.v1.Admin/Leave", "/djinn.v1.Admin/TransferLeadership", "/djinn.v1.Admin/RemoveMember",
		"/djinn.v1.Admin/Join", "/djinn.v1.Admin/AddMember"}
	r := rand.New(rand.NewPCG(1, 2))
	methods := server.SessionMethods(e.srv)
	for _, m := range slices.Sorted(func(yield func(string) bool) {
		for m := range methods {
			if !yield(m) {
				return
			}
		}
	}) {
		if slices.Contains(skip, m) {
			continue
		}
		service, name, _ := strings.Cut(strings.TrimPrefix(m, "/"), "/")
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		md := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(name))
		for i := range 60 {
			req := dynamicpb.NewMessage(md.Input())
			junk(r, req, 0)
			conn := e.conns[asOperator]
			if i%2 == 1 {
				conn = e.conns[asOwner]
			}
			ctx, cancel := context.WithTimeout(context.Background(), matrixTimeout)
			err := conn.Invoke(ctx, m, req, dynamicpb.NewMessage(md.Output()))
			cancel()
			if c := status.Code(err); c == codes.Internal || c == codes.Unknown || c == codes.DeadlineExceeded {
				s := req.String()
				t.Errorf("%s: %v\n  given %.300s", m, err, s)
			}
		}
	}
}
